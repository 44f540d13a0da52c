/**
 * TensorPromise: the producer end of a one-shot tensor channel between ranks.
 * setValue publishes the tensor in the TensorStore for the one consumer of
 * the matching TensorFuture, then a ready flag; the returned Work resolves
 * once the consumer has copied the value out (the store reads the producer's
 * memory in place, so the tensor must stay untouched until then).
 */
import { currentRank } from '../runtime/current-rank.ts';
import { CommTimeoutError, InvalidStateError } from '../runtime/errors.ts';
import type { TensorStore } from '../runtime/tensor-store.ts';
import { Work } from '../runtime/work.ts';
import { Tensor } from '../tensor/tensor.ts';
import { assertCommTensor } from '../tensor/validate.ts';
import {
  ERROR_TAG,
  type FutureWaitOptions,
  HANDLE_KIND,
  limitText,
  readyKey,
  storeOrCurrent,
  TensorFuture,
  VALUE_TAG,
} from './tensor-future.ts';

const READY_FLAG = Tensor.ones([1], 'uint8');

export class TensorPromise {
  readonly key: string;
  readonly producerRank: number;
  readonly #store: TensorStore;
  #settled = false;

  constructor(key: string, producerRank: number, store: TensorStore) {
    this.key = key;
    this.producerRank = producerRank;
    this.#store = store;
  }

  /** Fulfils the future with `tensor` (contiguous); resolves once the consumer has it. */
  setValue(tensor: Tensor, options: FutureWaitOptions = {}): Work<void> {
    return Work.run(() => {
      assertCommTensor(tensor, `TensorPromise.setValue("${this.key}")`);
      return this.#settle('setValue', tensor, VALUE_TAG, options);
    });
  }

  /** Fails the future: its get() rejects with this error's message. */
  setError(error: Error | string, options: FutureWaitOptions = {}): Work<void> {
    return Work.run(() => {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      const bytes = new TextEncoder().encode(message);
      return this.#settle('setError', Tensor.fromArray(bytes, [bytes.length], 'uint8'), ERROR_TAG, options);
    });
  }

  async #settle(what: string, value: Tensor, tag: string, options: FutureWaitOptions): Promise<void> {
    if (this.#settled) {
      throw new InvalidStateError(
        `TensorPromise.${what}("${this.key}"): the promise was already settled (once per promise)`,
      );
    }
    this.#settled = true;
    const store = this.#store;
    const flag = readyKey(this.key);
    await store.srcSet(this.key, value, 1, { tag });
    await store.srcSet(flag, READY_FLAG, 1);
    try {
      await store.srcWaitUntilGetFinished(this.key, options);
    } catch (error) {
      if (!(error instanceof CommTimeoutError)) throw error;
      throw new CommTimeoutError(
        `TensorPromise.${what}("${this.key}"): no holder of the future took the value within ${limitText(options.timeoutMs)}`,
        { cause: error },
      );
    } finally {
      // The flag is only there for ready(); a zero wait frees its slot whether or not anyone read it.
      await store.srcWaitUntilGetFinished(flag, { timeoutMs: 0 }).catch((e: unknown) => {
        if (!(e instanceof CommTimeoutError)) throw e;
      });
    }
  }
}

/**
 * A promise and its future, keyed uniquely in `store` (the current rank's by
 * default). Keep the promise; send `future.handle()` to the consumer.
 */
export function createTensorPromise(store?: TensorStore): { promise: TensorPromise; future: TensorFuture } {
  const found = storeOrCurrent(store, 'createTensorPromise');
  const own = (found as { rank?: unknown }).rank;
  const producerRank = typeof own === 'number' ? own : (currentRank()?.rank ?? -1);
  // The Web Crypto global loads node:crypto on first use; an import would load it in every rank thread.
  const key = `tp:${producerRank}:${crypto.randomUUID()}`;
  return {
    promise: new TensorPromise(key, producerRank, found),
    future: new TensorFuture({ kind: HANDLE_KIND, key, producerRank, ready: false }, found),
  };
}
