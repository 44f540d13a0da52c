/**
 * First-fit allocation of regions in one arena: a free list sorted by offset,
 * merged with its neighbours on free. An arena holds a handful of values at
 * once, so a linear scan is cheaper than any tree.
 */

interface Span {
  offset: number;
  length: number;
}

export class RegionAllocator {
  readonly #free: Span[];
  readonly #used = new Map<number, number>();

  /** `size` bytes, handed out in multiples of `align` (a power of two) at multiples of `align`. */
  constructor(
    readonly size: number,
    readonly align: number,
  ) {
    this.#free = [{ offset: 0, length: size - (size % align) }];
  }

  /** The offset of a free region of at least `bytes`, or undefined when none is large enough. */
  allocate(bytes: number): number | undefined {
    const length = Math.max(this.align, Math.ceil(bytes / this.align) * this.align);
    const at = this.#free.findIndex((span) => span.length >= length);
    if (at < 0) return undefined;
    const span = this.#free[at];
    const offset = span.offset;
    if (span.length === length) this.#free.splice(at, 1);
    else this.#free[at] = { offset: offset + length, length: span.length - length };
    this.#used.set(offset, length);
    return offset;
  }

  free(offset: number): void {
    const length = this.#used.get(offset);
    if (length === undefined) throw new Error(`RegionAllocator: no region is allocated at offset ${offset}`);
    this.#used.delete(offset);
    let at = this.#free.findIndex((span) => span.offset > offset);
    if (at < 0) at = this.#free.length;
    this.#free.splice(at, 0, { offset, length });
    const next = this.#free[at + 1];
    if (next && offset + length === next.offset) {
      this.#free[at] = { offset, length: length + next.length };
      this.#free.splice(at + 1, 1);
    }
    const previous = this.#free[at - 1];
    if (previous && previous.offset + previous.length === offset) {
      this.#free[at - 1] = { offset: previous.offset, length: previous.length + this.#free[at].length };
      this.#free.splice(at, 1);
    }
  }

  /** Regions handed out and not freed. */
  get allocated(): number {
    return this.#used.size;
  }
}
