/**
 * A single-producer single-consumer ring of records in shared memory (the
 * "fastbox" of Open MPI's shared-memory transport): the producer copies a
 * record in and then publishes it by moving `head`; the consumer reads it in
 * place and then frees it by moving `tail`. Both counters only grow (modulo
 * 2^32) and each has one writer, so no lock is taken; a process killed while
 * writing leaves `head` where it was, and its consumer never sees half a
 * record. Records are `u32 length` + bytes, 8-byte aligned; one that would
 * cross the end of the ring is preceded by a wrap mark and starts again at 0.
 *
 * Control words sit on cache lines of their own, so the producer's stores
 * to `head` do not keep invalidating the line the consumer writes `tail` to.
 */

/** Bytes of a ring's control block, before its data. */
export const RING_CONTROL_BYTES = 256;
/** Int32 indices of the control words: the producer moves `head`, the consumer `tail` (wait on them). */
export const RING_HEAD = 0;
export const RING_TAIL = 16;
/** Set by a producer that found no room; the consumer clears it and rings the producer's doorbell. */
const BLOCKED = 32;
const WRAP = 0xffffffff;
/** What peekOffset returns for no record published, and for a record whose length is impossible. */
export const NO_RECORD = -1;
const BAD_RECORD = -2;
const ALIGN = 8;
const LENGTH_BYTES = 4;

export class ByteRing {
  readonly #control: Int32Array;
  readonly #data: Uint8Array;
  readonly #view: DataView;
  readonly #size: number;
  /** The consumer's record being read: its end, applied by release(). */
  #pendingTail: number | undefined;
  #peekedBytes = 0;

  /** `memory` holds the control block and then `dataBytes` (a power of two) of records. */
  constructor(memory: ArrayBufferLike, byteOffset: number, dataBytes: number) {
    if (dataBytes < 1024 || (dataBytes & (dataBytes - 1)) !== 0) {
      throw new RangeError(`ByteRing: data bytes must be a power of two of at least 1024, got ${dataBytes}`);
    }
    this.#control = new Int32Array(memory, byteOffset, RING_CONTROL_BYTES / 4);
    this.#data = new Uint8Array(memory, byteOffset + RING_CONTROL_BYTES, dataBytes);
    this.#view = new DataView(memory, byteOffset + RING_CONTROL_BYTES, dataBytes);
    this.#size = dataBytes;
  }

  /** The control block's words, for waiting on RING_HEAD or RING_TAIL. */
  get controlWords(): Int32Array {
    return this.#control;
  }

  /** The largest record body one write can carry. */
  get maxRecordBytes(): number {
    return this.#size / 2 - LENGTH_BYTES - ALIGN;
  }

  /**
   * Producer: copies the concatenation of `parts` in as one record and
   * publishes it; false (nothing written) when the ring has no room now.
   */
  tryWrite(parts: readonly Uint8Array[], bodyBytes: number): boolean {
    if (bodyBytes > this.maxRecordBytes) {
      throw new RangeError(`ByteRing: a record of ${bodyBytes} bytes exceeds ${this.maxRecordBytes}`);
    }
    const head = Atomics.load(this.#control, RING_HEAD) >>> 0;
    const tail = Atomics.load(this.#control, RING_TAIL) >>> 0;
    const free = this.#size - ((head - tail) >>> 0);
    const need = align(LENGTH_BYTES + bodyBytes);
    let at = head & (this.#size - 1);
    const skip = at + need > this.#size ? this.#size - at : 0;
    if (skip + need > free) return false;
    if (skip > 0) {
      this.#view.setUint32(at, WRAP, true);
      at = 0;
    }
    this.#view.setUint32(at, bodyBytes, true);
    let offset = at + LENGTH_BYTES;
    for (const part of parts) {
      this.#data.set(part, offset);
      offset += part.length;
    }
    Atomics.store(this.#control, RING_HEAD, (head + skip + need) | 0);
    return true;
  }

  /** Producer: marks that it waits for room (cleared by the consumer as it frees records). */
  markBlocked(): void {
    Atomics.store(this.#control, BLOCKED, 1);
  }

  /** Consumer: whether a producer waits for room, clearing the mark. */
  takeBlocked(): boolean {
    return Atomics.exchange(this.#control, BLOCKED, 0) === 1;
  }

  /** Consumer: whether a record is there to read. */
  hasRecord(): boolean {
    return Atomics.load(this.#control, RING_HEAD) !== Atomics.load(this.#control, RING_TAIL);
  }

  /**
   * Consumer: the next record's body, read in place (copy what must outlive
   * release()); undefined when none was published. A length that cannot be a
   * record's is returned as a number: the ring's memory was overwritten.
   */
  peek(): Uint8Array | number | undefined {
    const at = this.peekOffset();
    if (at === NO_RECORD) return undefined;
    if (at === BAD_RECORD) return this.#peekedBytes;
    return this.#data.subarray(at, at + this.#peekedBytes);
  }

  /**
   * Consumer: peek() without making a view: where the next record's body
   * starts in `data`, NO_RECORD when none was published, a negative
   * BAD_RECORD when its length cannot be a record's (peek() returns that
   * length).
   */
  peekOffset(): number {
    const head = Atomics.load(this.#control, RING_HEAD) >>> 0;
    let tail = Atomics.load(this.#control, RING_TAIL) >>> 0;
    if (head === tail) return NO_RECORD;
    let at = tail & (this.#size - 1);
    let length = this.#view.getUint32(at, true);
    if (length === WRAP) {
      tail = (tail + this.#size - at) >>> 0;
      at = 0;
      if (head === tail) {
        this.#peekedBytes = WRAP;
        return BAD_RECORD;
      }
      length = this.#view.getUint32(0, true);
    }
    this.#peekedBytes = length;
    const need = align(LENGTH_BYTES + length);
    if (length > this.maxRecordBytes || need > (head - tail) >>> 0) return BAD_RECORD;
    this.#pendingTail = (tail + need) | 0;
    return at + LENGTH_BYTES;
  }

  /** The records' memory, as bytes and as a DataView (offsets as peekOffset gives them). */
  get data(): Uint8Array {
    return this.#data;
  }

  get view(): DataView {
    return this.#view;
  }

  /** Consumer: frees the record peek() returned. */
  release(): void {
    if (this.#pendingTail === undefined) throw new Error('ByteRing.release: no record was peeked');
    Atomics.store(this.#control, RING_TAIL, this.#pendingTail);
    this.#pendingTail = undefined;
  }
}

function align(bytes: number): number {
  return (bytes + ALIGN - 1) & ~(ALIGN - 1);
}
