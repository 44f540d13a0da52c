/**
 * TensorBufferPool: shared-memory buffers for compressed tensors, bounded by
 * `maxBytes` of active + cached capacity per worker. Idle buffers are indexed
 * by capacity (one list per size). A request takes the smallest idle buffer
 * that fits if it is at most twice the request, or if an exact-size buffer
 * would not fit the budget; otherwise it allocates exactly, evicting idle
 * buffers from the largest size down to make room. It never waits: when
 * nothing fits, it answers undefined and the caller sends raw.
 */
import { InvalidStateError } from '../../runtime/errors.ts';

export interface PooledBuffer {
  readonly buffer: SharedArrayBuffer;
  /** Back to the idle lists, for reuse. */
  release(): void;
  /** Dropped for good (its capacity leaves the budget): for buffers not worth caching. */
  discard(): void;
}

export interface BufferPoolStats {
  maxBytes: number;
  activeBytes: number;
  cachedBytes: number;
  /** Idle buffer capacities, smallest first. */
  cached: number[];
}

export class TensorBufferPool {
  readonly maxBytes: number;
  #activeBytes = 0;
  #cachedBytes = 0;
  /** capacity → idle buffers of exactly that capacity. */
  readonly #idle = new Map<number, SharedArrayBuffer[]>();
  /** The capacities in #idle, ascending. */
  readonly #sizes: number[] = [];

  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
      throw new RangeError(`TensorBufferPool: maxBytes must be a positive integer, got ${maxBytes}`);
    }
    this.maxBytes = maxBytes;
  }

  /** A buffer of at least `bytes` bytes, or undefined when the budget has no room for one. */
  acquire(bytes: number): PooledBuffer | undefined {
    if (!Number.isSafeInteger(bytes) || bytes < 1) {
      throw new RangeError(`TensorBufferPool.acquire: bytes must be a positive integer, got ${bytes}`);
    }
    const fit = this.#sizes.find((size) => size >= bytes);
    const exactFits = this.#activeBytes + this.#cachedBytes + bytes <= this.maxBytes;
    if (fit !== undefined && (fit <= 2 * bytes || !exactFits)) return this.#lease(this.#takeIdle(fit));
    if (this.#activeBytes + bytes > this.maxBytes) return undefined;
    while (this.#activeBytes + this.#cachedBytes + bytes > this.maxBytes) this.#takeIdle(this.#sizes.at(-1)!);
    return this.#lease(new SharedArrayBuffer(bytes));
  }

  stats(): BufferPoolStats {
    const cached = this.#sizes.flatMap((size) => this.#idle.get(size)!.map(() => size));
    return {
      maxBytes: this.maxBytes,
      activeBytes: this.#activeBytes,
      cachedBytes: this.#cachedBytes,
      cached,
    };
  }

  /** Drops every idle buffer; leased ones still come back (and are cached) or are discarded. */
  clear(): void {
    this.#idle.clear();
    this.#sizes.length = 0;
    this.#cachedBytes = 0;
  }

  #takeIdle(size: number): SharedArrayBuffer {
    const list = this.#idle.get(size)!;
    const buffer = list.pop()!;
    this.#cachedBytes -= size;
    if (list.length === 0) {
      this.#idle.delete(size);
      this.#sizes.splice(this.#sizes.indexOf(size), 1);
    }
    return buffer;
  }

  #lease(buffer: SharedArrayBuffer): PooledBuffer {
    const size = buffer.byteLength;
    this.#activeBytes += size;
    let done = false;
    const settle = (keep: boolean) => {
      if (done) throw new InvalidStateError('TensorBufferPool: a buffer was given back twice');
      done = true;
      this.#activeBytes -= size;
      if (keep) this.#cache(buffer);
    };
    return { buffer, release: () => settle(true), discard: () => settle(false) };
  }

  #cache(buffer: SharedArrayBuffer): void {
    const size = buffer.byteLength;
    const list = this.#idle.get(size);
    if (list) list.push(buffer);
    else {
      this.#idle.set(size, [buffer]);
      const at = this.#sizes.findIndex((s) => s > size);
      this.#sizes.splice(at < 0 ? this.#sizes.length : at, 0, size);
    }
    this.#cachedBytes += size;
  }
}
