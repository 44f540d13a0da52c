/**
 * Exchange: the keys, checks and clean-up of one numbered call over a
 * TensorStore. Keys are `${group}:${seq}:${phase}:${producer}` (with
 * `>${consumer}` for values meant for one consumer). Every value carries the
 * producer's call signature; a consumer whose own signature differs fails the
 * call on both sides. On any error the exchange finishes what it got (with the
 * error, so producers fail too) and withdraws what it published.
 */
import { CollectiveMismatchError, CommTimeoutError } from '../../runtime/errors.ts';
import type { TensorStore } from '../../runtime/tensor-store.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo } from '../backend.ts';

/** Signature prefix of a value published in place of data by a rank whose call failed locally. */
export const ABANDONED = '!abandoned:';
const WITHDRAW_TIMEOUT_MS = 200;

export interface GroupView {
  /** Key prefix unique to the group within the job. */
  id: string;
  name: string;
  rank: number;
  size: number;
  /** Global rank of each group rank, for messages. */
  ranks: readonly number[];
}

export class Exchange {
  readonly #store: TensorStore;
  readonly #group: GroupView;
  readonly #call: CallInfo;
  readonly #prefix: string;
  readonly #published = new Set<string>();
  readonly #got = new Set<string>();

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

  /** Peers of this rank in group-rank order. */
  peers(): number[] {
    return Array.from({ length: this.size }, (_, i) => i).filter((p) => p !== this.rank);
  }

  key(phase: number, producer: number, consumer?: number): string {
    return consumer === undefined
      ? `${this.#prefix}:${phase}:${producer}`
      : `${this.#prefix}:${phase}:${producer}>${consumer}`;
  }

  async publish(phase: number, tensor: Tensor, consumers: number, consumer?: number, signature?: string) {
    const key = this.key(phase, this.rank, consumer);
    await this.#store.srcSet(key, tensor, consumers, { tag: signature ?? this.#call.signature });
    this.#published.add(key);
  }

  /** Waits until every consumer of this rank's value for (phase, consumer) finished reading it. */
  async consumed(phase: number, consumer?: number): Promise<void> {
    const key = this.key(phase, this.rank, consumer);
    this.#published.delete(key);
    try {
      await this.#store.srcWaitUntilGetFinished(key, { timeoutMs: this.#call.timeoutMs });
    } catch (error) {
      throw this.#explain(error, `waiting for peers to finish reading its value ${key}`);
    }
  }

  /** A peer's value for (phase, producer[, consumer]), checked against this rank's own signature. */
  async get(phase: number, producer: number, consumer?: number, signature?: string): Promise<Tensor> {
    const key = this.key(phase, producer, consumer);
    let entry: Awaited<ReturnType<TensorStore['destGetEntry']>>;
    try {
      entry = await this.#store.destGetEntry(key, { timeoutMs: this.#call.timeoutMs });
    } catch (error) {
      throw this.#explain(
        error,
        `waiting for group rank ${producer} (global rank ${this.#group.ranks[producer]})`,
      );
    }
    this.#got.add(key);
    const expected = signature ?? this.#call.signature;
    if (entry.tag.startsWith(ABANDONED)) {
      throw new Error(
        `${this.#where()}: group rank ${producer} failed this call: ${entry.tag.slice(ABANDONED.length)}`,
      );
    }
    if (entry.tag !== expected) {
      throw new CollectiveMismatchError(
        `${this.#where()}: rank ${this.#group.ranks[this.rank]} called ${expected} as call #${this.#call.seq} on group ` +
          `"${this.#group.name}", but rank ${this.#group.ranks[producer]} called ${entry.tag} as call #${this.#call.seq}`,
      );
    }
    return entry.tensor;
  }

  /** Checks a received value's dtype and shape against what this rank expects from `producer`. */
  expectLike(
    received: Tensor,
    expected: { dtype: string; shape: readonly number[] },
    producer: number,
  ): void {
    const want = `${expected.dtype}[${expected.shape.join(',')}]`;
    if (received.describe() !== want) {
      throw new CollectiveMismatchError(
        `${this.#where()}: rank ${this.#group.ranks[this.rank]} expects ${want} from rank ` +
          `${this.#group.ranks[producer]}, which sent ${received.describe()}`,
      );
    }
  }

  async finish(phase: number, producer: number, consumer?: number): Promise<void> {
    const key = this.key(phase, producer, consumer);
    this.#got.delete(key);
    await this.#store.destFinishGet(key);
  }

  /** After a failure: hand the error to producers we read from, and withdraw our own values. */
  async abort(error: unknown): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    const mismatch = error instanceof CollectiveMismatchError;
    for (const key of this.#got) {
      await this.#store.destFinishGet(key, { error: message, mismatch }).catch(() => {});
    }
    this.#got.clear();
    for (const key of this.#published) {
      await this.#store.srcWaitUntilGetFinished(key, { timeoutMs: WITHDRAW_TIMEOUT_MS }).catch(() => {});
    }
    this.#published.clear();
  }

  #where(): string {
    // Point-to-point calls are matched per stream, not numbered in the group's collective order.
    const numbered = this.#call.seq >= 0 ? ` call #${this.#call.seq}` : '';
    return `${this.#call.signature}${numbered} on group "${this.#group.name}"`;
  }

  #explain(error: unknown, what: string): unknown {
    if (!(error instanceof CommTimeoutError)) return error;
    return new CommTimeoutError(
      `${this.#where()}: rank ${this.#group.ranks[this.rank]} timed out after ${this.#call.timeoutMs} ms ` +
        `${what}. ${error.message}`,
    );
  }
}

/** Runs one call's algorithm, cleaning up the exchange if it fails. */
export async function runExchange(
  exchange: Exchange,
  algorithm: (x: Exchange) => Promise<void>,
): Promise<void> {
  try {
    await algorithm(exchange);
  } catch (error) {
    await exchange.abort(error);
    throw error;
  }
}
