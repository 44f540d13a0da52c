/**
 * Peers' asks for values this rank has not offered yet (a TensorFuture's
 * holder may ask before the TensorPromise is set): kept per key until the
 * value is offered, bounded in number so a peer cannot grow them without end.
 * An ask beyond the bound is dropped, and the asker's get times out.
 */
export class Wants {
  readonly #byKey = new Map<string, number[]>();
  readonly #limit: number;
  #count = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  add(key: string, rank: number): void {
    if (this.#count >= this.#limit) return;
    const ranks = this.#byKey.get(key);
    if (ranks?.includes(rank)) return;
    if (ranks) ranks.push(rank);
    else this.#byKey.set(key, [rank]);
    this.#count++;
  }

  /** The ranks that asked for `key`, in the order they asked; forgotten here. */
  take(key: string): number[] {
    const ranks = this.#byKey.get(key) ?? [];
    this.#byKey.delete(key);
    this.#count -= ranks.length;
    return ranks;
  }

  clear(): void {
    this.#byKey.clear();
    this.#count = 0;
  }
}
