/**
 * The values one peer pushed to this rank that no get took yet, per key in
 * the order they came. Their bytes count against the store's budget from the
 * moment their header arrives until a get takes them or they are dropped, so
 * peers that run ahead cannot make this rank hold unbounded memory.
 */
import type { Tensor } from '../tensor/tensor.ts';

/** A value, or the note that it was refused (its get fails with the reason). */
export type Arrival = { id: number; tag: string; tensor: Tensor } | { id: number; refusal: string };

/** Bytes held for the gets of one store, shared by its inboxes. */
export interface Budget {
  used: number;
  readonly limit: number;
}

export class Inbox {
  readonly #queues = new Map<string, Arrival[]>();
  readonly #budget: Budget;
  /** What this inbox holds of the budget: queued values and the one arriving. */
  #bytes = 0;

  constructor(budget: Budget) {
    this.#budget = budget;
  }

  /** Counts a value about to arrive against the budget; false, counting nothing, when it does not fit. */
  reserve(nbytes: number): boolean {
    if (this.#budget.used + nbytes > this.#budget.limit) return false;
    this.#charge(nbytes);
    return true;
  }

  /** Gives back a reservation whose value will not come (no room could be allocated for it). */
  unreserve(nbytes: number): void {
    this.#charge(-nbytes);
  }

  /** Queues an arrival; a value's bytes were reserved when its header came. */
  put(key: string, arrival: Arrival): void {
    const queue = this.#queues.get(key);
    if (queue) queue.push(arrival);
    else this.#queues.set(key, [arrival]);
  }

  has(key: string): boolean {
    return this.#queues.has(key);
  }

  take(key: string): Arrival | undefined {
    const queue = this.#queues.get(key);
    const arrival = queue?.shift();
    if (queue?.length === 0) this.#queues.delete(key);
    if (arrival && 'tensor' in arrival) this.#charge(-arrival.tensor.nbytes);
    return arrival;
  }

  /** Drops the arrival `id` if no get took it yet (its producer gave up on it). */
  withdraw(id: number): void {
    for (const [key, queue] of this.#queues) {
      const at = queue.findIndex((arrival) => arrival.id === id);
      if (at < 0) continue;
      const [arrival] = queue.splice(at, 1);
      if (queue.length === 0) this.#queues.delete(key);
      if ('tensor' in arrival) this.#charge(-arrival.tensor.nbytes);
      return;
    }
  }

  /** Drops everything, also the bytes of a value that was still arriving. */
  clear(): void {
    this.#queues.clear();
    this.#charge(-this.#bytes);
  }

  #charge(nbytes: number): void {
    this.#bytes += nbytes;
    this.#budget.used += nbytes;
  }
}
