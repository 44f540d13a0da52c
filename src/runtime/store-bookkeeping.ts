/**
 * What every TensorStore keeps the same way, whatever carries its values: the
 * checks of its calls' arguments and the words of their errors, how a
 * producer counts its consumers' finishes and which failure its wait throws,
 * and the gets a rank took and has not finished. One set of messages for all
 * stores, so a caller's error reads the same between threads, processes and
 * nodes (test/store-contract/ holds every store to it).
 *
 * `where` is a function throughout: the words name the call and key, and are
 * built only for an error, since the checks run on every handshake.
 */
import { assertCommTensor, isCommTensor } from '../tensor/validate.ts';
import { CollectiveMismatchError, InvalidStateError, RankFailedError } from './errors.ts';
import { checkOptionKeys } from './option-keys.ts';
import { encodeKey, MAX_DIMS } from './store-limits.ts';
import type { StoreFinishOptions, StoreSetOptions, StoreWaitOptions } from './tensor-store.ts';

type Where = () => string;

const SET_OPTIONS = { tag: true, to: true, readInPlace: true } as const satisfies Record<
  keyof StoreSetOptions,
  true
>;
const WAIT_OPTIONS = { timeoutMs: true, from: true, pull: true } as const satisfies Record<
  keyof StoreWaitOptions,
  true
>;
const FINISH_OPTIONS = { error: true, mismatch: true } as const satisfies Record<
  keyof StoreFinishOptions,
  true
>;

/** The most consumers a value may have: headers and records count them in 32 bits. */
const MAX_CONSUMERS = 0xffffffff;

/**
 * srcSet's checks: a contiguous tensor of at most MAX_DIMS dimensions, then
 * checkSetCall's. Returns the key's UTF-8.
 */
export function checkSet(
  key: string,
  tensor: unknown,
  consumers: number,
  options: StoreSetOptions,
  where: Where,
): Uint8Array {
  if (!isCommTensor(tensor)) assertCommTensor(tensor, where());
  if (tensor.shape.length > MAX_DIMS) {
    throw new RangeError(`${where()}: at most ${MAX_DIMS} dimensions are supported`);
  }
  return checkSetCall(key, consumers, options, where);
}

/**
 * The checks of a set's other arguments (srcSet's and srcSetViews'): known
 * options, a key of 1..MAX_KEY_BYTES bytes, a count of consumers (0 is a
 * value nobody reads, as a collective's of a rank alone on its node: its wait
 * returns at once), and `to`, when given, naming as many ranks. Returns the
 * key's UTF-8.
 */
export function checkSetCall(
  key: string,
  consumers: number,
  options: StoreSetOptions,
  where: Where,
): Uint8Array {
  checkOptionKeys(options, SET_OPTIONS, where);
  const keyBytes = encodeKey(key, where);
  if (!Number.isSafeInteger(consumers) || consumers < 0 || consumers > MAX_CONSUMERS) {
    throw new RangeError(`${where()}: consumers must be a non-negative integer, got ${consumers}`);
  }
  const { to } = options;
  if (to !== undefined && (!Array.isArray(to) || to.length !== consumers)) {
    const Kind = Array.isArray(to) ? RangeError : TypeError;
    throw new Kind(`${where()}: options.to must list the ${consumers} consumers' ranks, got ${String(to)}`);
  }
  return keyBytes;
}

/**
 * The checks of a wait's options (destGet's, srcWaitUntilGetFinished's):
 * known options, a timeout that is a non-negative number, a producer rank
 * that is a non-negative integer. Returns the timeout, `fallbackMs` when not given.
 */
export function checkWait(options: StoreWaitOptions, fallbackMs: number, where: Where): number {
  checkOptionKeys(options, WAIT_OPTIONS, where);
  const { from } = options;
  if (from !== undefined && !(Number.isSafeInteger(from) && from >= 0)) {
    throw new RangeError(`${where()}: options.from must be a rank (a non-negative integer), got ${from}`);
  }
  return checkTimeout(options.timeoutMs ?? fallbackMs, where);
}

/** A wait's timeout: a non-negative number of milliseconds (0 looks once). */
export function checkTimeout(timeoutMs: number, where: Where): number {
  if (!(timeoutMs >= 0 && Number.isFinite(timeoutMs))) {
    throw new RangeError(`${where()}: timeoutMs must be a non-negative number, got ${timeoutMs}`);
  }
  return timeoutMs;
}

/** The checks of destFinishGet's options: known options, an error that is text. */
export function checkFinish(options: StoreFinishOptions, where: Where): void {
  checkOptionKeys(options, FINISH_OPTIONS, where);
  if (options.error !== undefined && typeof options.error !== 'string') {
    throw new TypeError(`${where()}: options.error must be a string, got ${typeof options.error}`);
  }
}

/** srcSet of a key whose last value this rank set is not finished yet. */
export function alreadySetError(where: Where): InvalidStateError {
  return new InvalidStateError(`${where()}: key is already set by this rank and not yet finished`);
}

/** srcSet of a key another value (of any rank) holds, in a store whose keys all ranks share. */
export function heldKeyError(where: Where, producerRank?: number): InvalidStateError {
  const by = producerRank === undefined ? '' : ` (set by rank ${producerRank})`;
  return new InvalidStateError(
    `${where()}: key is still held by an earlier value${by} whose consumers have not finished`,
  );
}

/** srcWaitUntilGetFinished of a key this rank has no value of. */
export function notSetError(where: Where, rank: number): InvalidStateError {
  return new InvalidStateError(`${where()}: rank ${rank} has not set this key`);
}

/** destFinishGet of a key this rank holds no get of. */
export function noGetError(where: Where, rank: number): InvalidStateError {
  return new InvalidStateError(`${where()}: rank ${rank} has no unfinished destGet of this key`);
}

/** Any call on a closed store, and every wait pending when it closed. `kind`: 'memory', 'file', 'network'. */
export function closedError(where: Where, kind: string, rank: number): InvalidStateError {
  return new InvalidStateError(`${where()}: the ${kind} store of rank ${rank} is closed`);
}

/** The words of every store's timeout: the call, how long, where, and what is known (`detail`). */
export function timeoutText(where: Where, timeoutMs: number, rank: number, detail: string): string {
  return `${where()} timed out after ${timeoutMs} ms on rank ${rank}: ${detail}`;
}

/** Why a get found no value, in a store whose keys all ranks share: none was set, or every consumer got it. */
export function unsetKeyText(exhausted: boolean): string {
  return exhausted
    ? 'the value under this key was already got by all its consumers, and no new value was set'
    : 'no rank has set this key';
}

/** How far a producer's consumers are, at the start of its wait's timeout. */
export function finishedText(finished: number, consumers: number): string {
  return `${finished} of ${consumers} consumers finished`;
}

/** What a consumer reported with its finish (StoreFinishOptions.error and mismatch). */
export interface ConsumerFailure {
  error: string;
  mismatch: boolean;
}

/**
 * The error a producer's wait throws for a consumer's failure: its text as
 * reported, as a RankFailedError (blaming `consumer`, the consumer's global
 * rank, where the store knows it); a disagreement between ranks stays a
 * CollectiveMismatchError (`mismatchError` makes a subclass of it, for callers
 * that name the peer).
 */
export function failureError(
  failure: ConsumerFailure,
  mismatchError: (text: string) => CollectiveMismatchError = (text) => new CollectiveMismatchError(text),
  consumer?: number,
): CollectiveMismatchError | RankFailedError {
  return failure.mismatch ? mismatchError(failure.error) : new RankFailedError(failure.error, consumer);
}

/**
 * How a value stands with its consumers, kept by a producer that hears of
 * their finishes one by one (a marker file, a ring record, a frame): how many
 * are still to finish, and the first failure reported, which its wait throws.
 */
export interface FinishTally {
  unfinished: number;
  failure: ConsumerFailure | undefined;
}

/** Counts one consumer's finish, keeping the first failure reported; true once all finished. */
export function countFinish(tally: FinishTally, failure: ConsumerFailure | undefined): boolean {
  tally.unfinished--;
  tally.failure ??= failure;
  return tally.unfinished === 0;
}

/** Throws the first failure a consumer reported, if one did. */
export function throwFailure(tally: FinishTally): void {
  if (tally.failure) throw failureError(tally.failure);
}

/**
 * The gets a rank took and has not finished, per key, oldest first:
 * destFinishGet finishes the oldest get of its key (a rank may hold several
 * of one key: from several producers, or several consumers' shares).
 */
export class UnfinishedGets<T> {
  readonly #byKey = new Map<string, T[]>();

  add(key: string, get: T): void {
    const list = this.#byKey.get(key);
    if (list) list.push(get);
    else this.#byKey.set(key, [get]);
  }

  /** The oldest unfinished get of `key`, taken off the list; undefined if none. */
  take(key: string): T | undefined {
    const list = this.#byKey.get(key);
    const get = list?.shift();
    if (list?.length === 0) this.#byKey.delete(key);
    return get;
  }

  /** Empties the list (a closing store lets go of its gets); returns every get it held. */
  clear(): T[] {
    const all = [...this.#byKey.values()].flat();
    this.#byKey.clear();
    return all;
  }
}
