/**
 * TensorFuture: the consumer end of a TensorPromise, on any rank of the job.
 * It is resolved through the TensorStore: the producer publishes the value
 * under the future's key for one consumer, so a value is delivered once and
 * its slot released afterwards.
 *
 * ready() must not take the value (a claim cannot be undone, and claiming a
 * large value may still wait for its buffer to reach this thread). Instead the
 * producer publishes, after the value, a one-byte ready flag under a second
 * key: a flag small enough to sit inside the store's slot is claimed in one
 * step, so ready() can try it with a zero timeout and never lose anything.
 *
 * A future travels between ranks as a plain handle (`handle()` /
 * `TensorFuture.fromHandle`), since structured clone drops class instances.
 * Handing it off retires the local object, so only one holder can get the value.
 */
import { currentRank } from '../runtime/current-rank.ts';
import { CommTimeoutError, InvalidStateError, RankFailedError } from '../runtime/errors.ts';
import type { StoreEntry, TensorStore } from '../runtime/tensor-store.ts';
import { Work } from '../runtime/work.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { describeValue } from '../tensor/validate.ts';

export interface TensorFutureHandle {
  readonly kind: typeof HANDLE_KIND;
  readonly key: string;
  /** Global rank of the producer, or -1 when its store does not say. */
  readonly producerRank: number;
  /** Whether the sender already saw the value ready (its ready flag is consumed by then). */
  readonly ready: boolean;
}

export interface FutureWaitOptions {
  /** How long get() waits for the value; the store's default when omitted. */
  timeoutMs?: number;
}

export const HANDLE_KIND = 'tensorcomm.TensorFuture';
/** Store tags telling a value from an error the producer set. */
export const VALUE_TAG = 'tensor-promise:value';
export const ERROR_TAG = 'tensor-promise:error';

/** The key of the ready flag published after the value under `key`. */
export function readyKey(key: string): string {
  return `${key}!`;
}

/** How a wait limit reads in a timeout message. */
export function limitText(timeoutMs: number | undefined): string {
  return timeoutMs === undefined ? "the store's timeout" : `${timeoutMs} ms`;
}

/** `store`, or the current rank's store when omitted. */
export function storeOrCurrent(store: TensorStore | undefined, where: string): TensorStore {
  const found = store ?? currentRank()?.store;
  if (!found) throw new InvalidStateError(`${where}: no rank context is current here; pass a TensorStore`);
  return found;
}

type State = 'waiting' | 'ready' | 'getting' | 'delivered' | 'handedOff';

export class TensorFuture {
  readonly key: string;
  readonly producerRank: number;
  readonly #store: TensorStore;
  #state: State;

  constructor(handle: TensorFutureHandle, store: TensorStore) {
    this.key = handle.key;
    this.producerRank = handle.producerRank;
    this.#store = store;
    this.#state = handle.ready ? 'ready' : 'waiting';
  }

  /** Rebuilds a future sent as a handle, on the current rank's store unless one is given. */
  static fromHandle(handle: unknown, store?: TensorStore): TensorFuture {
    const where = 'TensorFuture.fromHandle';
    const h = handle as Partial<TensorFutureHandle> | null;
    if (h?.kind !== HANDLE_KIND || typeof h.key !== 'string' || h.key.length === 0) {
      throw new TypeError(`${where}: expected a handle from future.handle(), got ${describeValue(handle)}`);
    }
    if (!Number.isInteger(h.producerRank) || typeof h.ready !== 'boolean') {
      throw new TypeError(`${where}: handle for "${h.key}" lacks an integer producerRank or a boolean ready`);
    }
    return new TensorFuture(h as TensorFutureHandle, storeOrCurrent(store, where));
  }

  /** A structured-cloneable handle for another rank; this object can no longer get the value. */
  handle(): TensorFutureHandle {
    this.#usable('handle');
    const ready = this.#state === 'ready';
    this.#state = 'handedOff';
    return { kind: HANDLE_KIND, key: this.key, producerRank: this.producerRank, ready };
  }

  /** Whether get() would find the value (or the producer's error) now; never waits for the producer. */
  async ready(): Promise<boolean> {
    this.#usable('ready');
    if (this.#state !== 'waiting') return this.#state === 'ready';
    const flag = readyKey(this.key);
    try {
      await this.#store.destGetEntry(flag, { timeoutMs: 0, from: this.producerRank, pull: true });
    } catch (error) {
      if (error instanceof CommTimeoutError) return false;
      throw error;
    }
    await this.#store.destFinishGet(flag);
    // A get() started meanwhile owns the state now.
    if (this.#state === 'waiting') this.#state = 'ready';
    return true;
  }

  /** The value, copied out of the producer's memory; rejects with the producer's error if it set one. */
  get(options: FutureWaitOptions = {}): Work<Tensor> {
    return Work.run(async () => {
      this.#usable('get');
      const before = this.#state;
      this.#state = 'getting';
      let entry: StoreEntry;
      try {
        entry = await this.#store.destGetEntry(this.key, {
          timeoutMs: options.timeoutMs,
          from: this.producerRank,
          pull: true,
        });
      } catch (error) {
        this.#state = before;
        if (!(error instanceof CommTimeoutError)) throw error;
        throw new CommTimeoutError(
          `TensorFuture.get: no value under "${this.key}" from producer rank ${this.producerRank} ` +
            `within ${limitText(options.timeoutMs)} (was it already delivered to another holder of this future?)`,
          { cause: error },
        );
      }
      this.#state = 'delivered';
      if (entry.tag === ERROR_TAG) {
        const message = new TextDecoder().decode(entry.tensor.bytes());
        await this.#store.destFinishGet(this.key);
        throw new RankFailedError(
          `TensorFuture.get("${this.key}"): producer rank ${entry.producerRank} failed: ${message}`,
          entry.producerRank,
        );
      }
      const value = entry.tensor.clone();
      await this.#store.destFinishGet(this.key);
      return value;
    });
  }

  #usable(what: string): void {
    const where = `TensorFuture.${what}("${this.key}")`;
    if (this.#state === 'delivered')
      throw new InvalidStateError(`${where}: the value was already delivered and released`);
    if (this.#state === 'handedOff') {
      throw new InvalidStateError(
        `${where}: this future was handed off with handle(); use the future built from it`,
      );
    }
    if (this.#state === 'getting')
      throw new InvalidStateError(`${where}: a get() of this future is in progress`);
  }
}
