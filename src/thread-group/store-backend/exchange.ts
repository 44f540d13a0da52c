/**
 * Exchange: the keys, checks and clean-up of one numbered call over a
 * TensorStore. Keys are `${group}:${seq}:${phase}:${producer}` (with
 * `>${consumer}` for values meant for one consumer). Every value carries the
 * producer's call signature; a consumer whose own signature differs fails the
 * call on both sides. On any error the exchange finishes what it got (with the
 * error, so producers fail too) and withdraws what it published.
 *
 * Fingerprints: phase 0 of every collective is an exchange in which each rank
 * publishes one value for all others and reads all others'. allReduce,
 * allGather, reduceScatterTensor and barrier move their data that way; the
 * others (rooted, pairwise) start with an empty value there (`compareCalls`)
 * and move data from phase 1. So whatever two ranks call as the same number,
 * each reads the other's signature first, and any disagreement (op, root,
 * shapes, dtypes, order) fails every rank at once.
 */
import { CollectiveMismatchError, CommTimeoutError, RankFailedError } from '../../runtime/errors.ts';
import type {
  StoreEntry,
  StoreSetOptions,
  StoreWaitOptions,
  TensorStore,
} from '../../runtime/tensor-store.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo, GroupView } from '../backend.ts';
import {
  abandonedError,
  callWhere,
  departedError,
  layoutMismatchError,
  mismatchError,
  peerFailureError,
  ranksText,
  timeoutError,
} from './call-failure.ts';
import { copyElements } from './slices.ts';

/** Signature prefix of a value published in place of data by a rank whose call failed locally. */
export const ABANDONED = '!abandoned:';
const WITHDRAW_TIMEOUT_MS = 200;
/** The value a rank without data for everyone publishes in phase 0: only its tag (the signature) counts. */
export const FINGERPRINT = Tensor.empty([0], 'uint8');

/** What a consumer is handed, with the producer's signature (a StoreEntry or a StoreViewsEntry). */
interface Tagged {
  tag: string;
}
type TakeEntry<E> = (key: string, options: StoreWaitOptions) => Promise<E>;

export class Exchange {
  readonly #store: TensorStore;
  readonly #group: GroupView;
  readonly #call: CallInfo;
  readonly #prefix: string;
  readonly #published = new Set<string>();
  readonly #got = new Set<string>();
  /** Forgets this call's wishes that values land in place (landIn) that no value met. */
  readonly #landings: (() => void)[] = [];
  /** Keys whose consumers are awaited only when the call's algorithm is done (the fingerprint). */
  readonly #deferred: string[] = [];
  /** Added to data phases once the fingerprint took phase 0. */
  #phaseBase = 0;

  constructor(store: TensorStore, group: GroupView, call: CallInfo, prefix = `${group.id}:${call.seq}`) {
    this.#store = store;
    this.#group = group;
    this.#call = call;
    this.#prefix = prefix;
  }

  get rank(): number {
    return this.#group.rank;
  }

  get size(): number {
    return this.#group.size;
  }

  /** The global rank of group rank `p`, for messages. */
  globalRank(p: number): number {
    return this.#group.ranks[p];
  }

  /** The node group rank `p` runs on, where the store spans nodes (TensorStore.nodeOf). */
  nodeOf(p: number): string | undefined {
    return this.#store.nodeOf?.(this.globalRank(p));
  }

  /**
   * An exchange among some of the group's ranks (in the order given), keyed
   * under this call's keys with `tag`: an algorithm's step over a subset of
   * ranks, e.g. the node leaders. This rank must be one of them.
   */
  among(groupRanks: readonly number[], tag: string): Exchange {
    const rank = groupRanks.indexOf(this.rank);
    // An algorithm's step picks the ranks: only a bug in tensorcomm leaves this rank out.
    if (rank < 0)
      throw new Error(`Exchange.among: group rank ${this.rank} is not among ${groupRanks.join(', ')}`);
    const view: GroupView = {
      ...this.#group,
      rank,
      size: groupRanks.length,
      ranks: this.globalRanks(groupRanks),
    };
    return new Exchange(this.#store, view, this.#call, `${this.#prefix}:${tag}`);
  }

  /** Peers of this rank in group-rank order. */
  peers(): number[] {
    return Array.from({ length: this.size }, (_, i) => i).filter((p) => p !== this.rank);
  }

  key(phase: number, producer: number, consumer?: number): string {
    phase += this.#phaseBase;
    return consumer === undefined
      ? `${this.#prefix}:${phase}:${producer}`
      : `${this.#prefix}:${phase}:${producer}>${consumer}`;
  }

  /**
   * One exchange in which every rank publishes `mine` for all others and
   * hands every peer's value to `read` (in group-rank order) before finishing it.
   */
  async readAll(phase: number, mine: Tensor, read: (producer: number, value: Tensor) => void): Promise<void> {
    await this.#publishAndRead(phase, mine, read);
    await this.consumed(phase);
  }

  /**
   * The fingerprint exchange of a call whose data does not go to every rank:
   * an empty value under phase 0 for every peer, every peer's read and compared.
   * Our value's readers are awaited at the end of the call (settle), not here.
   */
  async compareCalls(): Promise<void> {
    if (this.size > 1) {
      await this.#publishAndRead(0, FINGERPRINT, () => {});
      this.#deferred.push(this.key(0, this.rank));
    }
    this.#phaseBase = 1;
  }

  async #publishAndRead(phase: number, mine: Tensor, read: (producer: number, value: Tensor) => void) {
    await this.publish(phase, mine, this.peers());
    for (const p of this.peers()) {
      read(p, await this.get(phase, p));
      await this.finish(phase, p);
    }
  }

  /**
   * Asks the store to write the value of (phase, producer[, consumer]) straight
   * into `into` as it arrives (TensorStore.landIn), where it can: `get` then
   * hands out a tensor over `into`'s own memory (see `landed`). The caller
   * must not touch `into` until then, and the producer's causality must make
   * it free by the time the value comes.
   */
  /** Whether the store can write values straight into a tensor of the consumer's (TensorStore.landIn). */
  get landsInPlace(): boolean {
    return this.#store.landIn !== undefined;
  }

  landIn(phase: number, producer: number, into: Tensor, consumer?: number): void {
    const cancel = this.#store.landIn?.(this.key(phase, producer, consumer), into, {
      from: this.globalRank(producer),
    });
    if (cancel) this.#landings.push(cancel);
  }

  /** Forgets the wishes of landIn that no value met. */
  #forgetLandings(): void {
    for (const cancel of this.#landings) cancel();
    this.#landings.length = 0;
  }

  /** Waits for the readers of deferred values; called once the algorithm succeeded. */
  async settle(): Promise<void> {
    this.#forgetLandings();
    for (const key of this.#deferred) await this.#consumedKey(key, this.peers());
    this.#deferred.length = 0;
  }

  /** `tensor` for the group ranks `readers` (a store spanning nodes sends it to them), keyed for `consumer` if given. */
  publish(
    phase: number,
    tensor: Tensor,
    readers: readonly number[],
    consumer?: number,
    signature?: string,
  ): Promise<void> {
    return this.#set(phase, tensor, readers, consumer, { tag: signature ?? this.#call.signature });
  }

  /**
   * `publish` for a value its readers use where their get hands it to them
   * and land nowhere: the inputs of a reduction (StoreSetOptions.readInPlace).
   */
  publishOperand(
    phase: number,
    tensor: Tensor,
    readers: readonly number[],
    consumer?: number,
  ): Promise<void> {
    return this.#set(phase, tensor, readers, consumer, { tag: this.#call.signature, readInPlace: true });
  }

  async #set(
    phase: number,
    tensor: Tensor,
    readers: readonly number[],
    consumer: number | undefined,
    options: StoreSetOptions,
  ): Promise<void> {
    const key = this.key(phase, this.rank, consumer);
    await this.#store.srcSet(key, tensor, readers.length, { ...options, to: this.globalRanks(readers) });
    this.#published.add(key);
  }

  /** Several host tensors as one value (see TensorStore.srcSetViews), keyed as `publish` keys it. */
  async publishViews(phase: number, tensors: readonly Tensor[], readers: readonly number[]): Promise<void> {
    const key = this.key(phase, this.rank);
    await this.#viewsStore().srcSetViews(key, tensors, readers.length, {
      tag: this.#call.signature,
      to: this.globalRanks(readers),
    });
    this.#published.add(key);
  }

  /** The global ranks of group ranks, for the store. */
  globalRanks(groupRanks: readonly number[]): number[] {
    return groupRanks.map((p) => this.#group.ranks[p]);
  }

  /** A peer's views value for this rank, checked like `get`. */
  async getViews(phase: number, producer: number): Promise<Tensor[]> {
    const store = this.#viewsStore();
    const entry = await this.#checkedEntry(phase, producer, undefined, undefined, (key, options) =>
      store.destGetViews(key, options),
    );
    return entry.views;
  }

  #viewsStore(): Required<Pick<TensorStore, 'srcSetViews' | 'destGetViews'>> {
    const store = this.#store;
    if (!store.srcSetViews || !store.destGetViews) {
      throw new TypeError(
        `${this.where()}: this group's store cannot lend views (${store.constructor.name})`,
      );
    }
    return store as Required<Pick<TensorStore, 'srcSetViews' | 'destGetViews'>>;
  }

  /** Waits until every consumer of this rank's value for (phase, consumer) finished reading it. */
  async consumed(phase: number, consumer?: number): Promise<void> {
    const readers = consumer === undefined ? this.peers() : [consumer];
    await this.#consumedKey(this.key(phase, this.rank, consumer), readers);
  }

  /**
   * Lets go of this rank's value of `phase` (for every peer) without waiting
   * for its readers where the store copied it when it was set
   * (TensorStore.srcRelease), else waits for them as `consumed` does. Only for
   * exchanges in which every reader compares the signature of what it reads
   * itself and this rank read every reader's value: a disagreement fails
   * both sides without the readers' finishes.
   */
  async released(phase: number): Promise<void> {
    const key = this.key(phase, this.rank);
    if (this.#store.srcRelease?.(key)) this.#published.delete(key);
    else await this.consumed(phase);
  }

  async #consumedKey(key: string, readers: number[]): Promise<void> {
    this.#published.delete(key);
    try {
      await this.#store.srcWaitUntilGetFinished(key, { timeoutMs: this.#call.timeoutMs });
    } catch (error) {
      throw this.#explain(error, `waiting for ${this.#ranksText(readers)} to read its value`);
    }
  }

  #ranksText(groupRanks: readonly number[]): string {
    return ranksText(this.#group, groupRanks);
  }

  /** A peer's value for (phase, producer[, consumer]), checked against this rank's own signature. */
  async get(phase: number, producer: number, consumer?: number, signature?: string): Promise<Tensor> {
    const entry = await this.#checkedEntry(phase, producer, consumer, signature, (key, options) =>
      this.#store.destGetEntry(key, options),
    );
    return entry.tensor;
  }

  /**
   * `get` without waiting: the value when `producer` has published it (taken
   * and checked as `get` takes it), undefined when not yet.
   */
  async tryGet(phase: number, producer: number): Promise<Tensor | undefined> {
    const key = this.key(phase, producer);
    let entry: StoreEntry;
    try {
      // A timeout of 0 looks once: nothing is claimed when the value is not there.
      entry = await this.#store.destGetEntry(key, { timeoutMs: 0, from: this.globalRank(producer) });
    } catch (error) {
      if (error instanceof CommTimeoutError) return undefined;
      throw error;
    }
    return this.#checked(key, producer, entry, undefined).tensor;
  }

  async #checkedEntry<E extends Tagged>(
    phase: number,
    producer: number,
    consumer: number | undefined,
    signature: string | undefined,
    take: TakeEntry<E>,
  ): Promise<E> {
    const key = this.key(phase, producer, consumer);
    let entry: E;
    // Words for a slow wait or a failure only: not built for every get.
    const waitingFor = () => this.#ranksText([producer]);
    try {
      const from = this.globalRank(producer);
      entry = await this.#getEntry(key, producer, waitingFor, (k, options) =>
        take(k, { timeoutMs: options.timeoutMs, from }),
      );
    } catch (error) {
      throw this.#explain(error, `waiting for ${waitingFor()}`);
    }
    return this.#checked(key, producer, entry, signature);
  }

  /** A value taken under `key`: this rank must finish it; fails unless it carries this rank's signature. */
  #checked<E extends Tagged>(key: string, producer: number, entry: E, signature: string | undefined): E {
    this.#got.add(key);
    const expected = signature ?? this.#call.signature;
    if (entry.tag.startsWith(ABANDONED)) {
      throw abandonedError(this.#group, this.#call, producer, entry.tag.slice(ABANDONED.length));
    }
    if (entry.tag !== expected) throw mismatchError(this.#group, this.#call, expected, producer, entry.tag);
    return entry;
  }

  /**
   * destGetEntry; when the call is monitored, in slices of its peerCheckMs after
   * the first, so a producer that left its main function fails us at once
   * and the rank's status says whom it waits for.
   */
  async #getEntry<E>(
    key: string,
    producer: number,
    waitingFor: () => string,
    take: TakeEntry<E>,
  ): Promise<E> {
    const debug = this.#call.debug;
    const timeoutMs = this.#call.timeoutMs;
    if (!debug) return take(key, { timeoutMs });
    const deadline = performance.now() + timeoutMs;
    const globalProducer = this.#group.ranks[producer];
    for (;;) {
      const remaining = deadline - performance.now();
      try {
        return await take(key, {
          timeoutMs: Math.max(1, Math.ceil(Math.min(remaining, debug.peerCheckMs))),
        });
      } catch (error) {
        if (!(error instanceof CommTimeoutError)) throw error;
        // The store timed out on the last slice; the call waited its whole timeout.
        if (remaining <= debug.peerCheckMs) {
          throw new CommTimeoutError(error.message.replace(/after [\d.]+ ms/, `after ${timeoutMs} ms`));
        }
      }
      debug.monitor.waiting(debug.record, waitingFor());
      // A producer that failed this call withdraws its values: its error is the answer, not a timeout.
      const failure = peerFailureError(this.#group, this.#call, debug, globalProducer);
      if (failure) throw failure;
      const departure = debug.monitor.departure(globalProducer);
      if (departure !== undefined) {
        // It may have published just before it left.
        const last = await take(key, { timeoutMs: 1 }).catch(() => undefined);
        if (last) return last;
        throw departedError(this.#group, this.#call, debug, globalProducer, departure);
      }
    }
  }

  /** Checks a received value's dtype and shape against what this rank expects from `producer`. */
  expectLike(
    received: Tensor,
    expected: { dtype: string; shape: readonly number[] },
    producer: number,
  ): void {
    const want = `${expected.dtype}[${expected.shape.join(',')}]`;
    if (received.describe() !== want) {
      throw layoutMismatchError(this.#group, this.#call, want, producer, received.describe());
    }
  }

  async finish(phase: number, producer: number, consumer?: number): Promise<void> {
    const key = this.key(phase, producer, consumer);
    this.#got.delete(key);
    await this.#store.destFinishGet(key);
  }

  /** After a failure: hand the error to producers we read from, and withdraw our own values. */
  async abort(error: unknown): Promise<void> {
    this.#forgetLandings();
    const message = error instanceof Error ? error.message : String(error);
    const mismatch = error instanceof CollectiveMismatchError;
    // Best effort: the call fails with `error` whatever these steps meet (peers that failed or left too).
    for (const key of this.#got) {
      await this.#store.destFinishGet(key, { error: message, mismatch }).catch(() => {});
    }
    this.#got.clear();
    for (const key of this.#published) {
      await this.#store.srcWaitUntilGetFinished(key, { timeoutMs: WITHDRAW_TIMEOUT_MS }).catch(() => {});
    }
    this.#published.clear();
  }

  /** The call as messages name it, e.g. `barrier() call #3 on group "world"` or `recv(float32[4], src=1, tag=0) on …`. */
  where(): string {
    return callWhere(this.#call, this.#group);
  }

  #explain(error: unknown, what: string): unknown {
    // A store's own text names its keys, which mean nothing to the caller: the call and who it waited for do.
    if (error instanceof RankFailedError && !error.message.startsWith(this.where())) {
      return new RankFailedError(
        `${this.where()}: rank ${this.#group.ranks[this.rank]} failed ${what}: ${withoutStoreCall(error.message)}`,
        error.failedRank,
      );
    }
    if (!(error instanceof CommTimeoutError)) return error;
    return timeoutError(this.#group, this.#call, what);
  }
}

/** Puts a value taken from the store into `into`: nothing to do where it landed there (landIn), else a copy. */
export function landOrCopy(into: Tensor, value: Tensor): void {
  if (!landed(value, into)) copyElements(into, 0, value);
}

/** Whether `value` is `into`'s own memory (a value that landed in place): nothing to copy. */
function landed(value: Tensor, into: Tensor): boolean {
  return (
    value.device === 'cpu' &&
    value.data.buffer === into.data.buffer &&
    value.data.byteOffset === into.data.byteOffset &&
    value.nbytes === into.nbytes
  );
}

/** A store error's text without the store call it names first (`destGet("…") on rank 0: `). */
function withoutStoreCall(message: string): string {
  return message.replace(/^\w+\("[^"]*"\) on rank \d+: /, '');
}

/** Runs one call's algorithm, cleaning up the exchange if it fails. */
export async function runExchange(
  exchange: Exchange,
  algorithm: (x: Exchange) => Promise<void>,
): Promise<void> {
  try {
    await algorithm(exchange);
    await exchange.settle();
  } catch (error) {
    await exchange.abort(error);
    throw error;
  }
}
