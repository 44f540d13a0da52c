/**
 * Buffers of finished values, kept by size for the next value of that size:
 * a training loop moves the same sizes over and over, and a fresh 64 MiB
 * ArrayBuffer costs page faults and zeroing on every transfer. Bounded in
 * total bytes; beyond it a buffer is left to the garbage collector.
 */
export class SpareBuffers {
  readonly #bySize = new Map<number, ArrayBuffer[]>();
  readonly #limit: number;
  #bytes = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  take(nbytes: number): ArrayBuffer | undefined {
    const list = this.#bySize.get(nbytes);
    const buffer = list?.pop();
    if (!buffer) return undefined;
    if (list!.length === 0) this.#bySize.delete(nbytes);
    this.#bytes -= nbytes;
    return buffer;
  }

  give(buffer: ArrayBuffer): void {
    if (this.#bytes + buffer.byteLength > this.#limit) return;
    const list = this.#bySize.get(buffer.byteLength);
    if (list) list.push(buffer);
    else this.#bySize.set(buffer.byteLength, [buffer]);
    this.#bytes += buffer.byteLength;
  }

  clear(): void {
    this.#bySize.clear();
    this.#bytes = 0;
  }
}
