/**
 * The job-wide abort flag every wait checks: word 0 holds 0 while the job is
 * healthy, else the failed rank + 2 (so NO_RANK, used when the launcher itself
 * aborted, e.g. on timeout, is still nonzero). The reason travels as UTF-8 beside it so every
 * rank can name the failed rank and its error.
 */
import { RankFailedError } from './errors.ts';

const HEADER_WORDS = 2; // [state, message length]
const MESSAGE_BYTES = 4096;
export const NO_RANK = -1;
/** Word 0 while a raise writes its reason. */
const CLAIMED = -0x7fffffff;

/** What ends a rank's waits besides their own words: the job's abort, or its store closing (AbortWord is one). */
export interface JobStop {
  /** The error a wait ends with; undefined while the job goes on. */
  error(): Error | undefined;
  throwIfAborted(): void;
}

export class AbortWord implements JobStop {
  readonly #words: Int32Array;
  readonly #message: Uint8Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(HEADER_WORDS * 4 + MESSAGE_BYTES)) {
    this.#words = new Int32Array(buffer, 0, HEADER_WORDS);
    this.#message = new Uint8Array(buffer, HEADER_WORDS * 4, MESSAGE_BYTES);
  }

  /** True once the flag is up with its reason (a raise under way, its reason not yet written, is not yet). */
  get aborted(): boolean {
    const state = Atomics.load(this.#words, 0);
    return state !== 0 && state !== CLAIMED;
  }

  /** Raises the flag once; later calls keep the first reason (the root cause). */
  abort(rank: number, reason: string): boolean {
    const encoded = new TextEncoder().encode(reason).subarray(0, MESSAGE_BYTES);
    // Claim with a sentinel first so the message is complete before anyone reads it.
    if (Atomics.compareExchange(this.#words, 0, 0, CLAIMED) !== 0) return false;
    this.#message.set(encoded);
    Atomics.store(this.#words, 1, encoded.length);
    Atomics.store(this.#words, 0, rank + 2);
    Atomics.notify(this.#words, 0);
    return true;
  }

  /**
   * The error a waiting rank rejects with once the flag is up; undefined
   * while healthy, and while a raise is still writing its reason: a wait that
   * looks often (a yielding one) would otherwise fail with no root cause.
   */
  error(): RankFailedError | undefined {
    const state = Atomics.load(this.#words, 0);
    if (state === 0 || state === CLAIMED) return undefined;
    const rank = state - 2;
    const length = Atomics.load(this.#words, 1);
    const reason = new TextDecoder().decode(this.#message.slice(0, length));
    return new RankFailedError(reason, rank === NO_RANK ? undefined : rank);
  }

  throwIfAborted(): void {
    const error = this.error();
    if (error) throw error;
  }
}
