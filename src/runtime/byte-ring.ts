/**
 * A single-producer single-consumer ring of records in shared memory (the
 * "fastbox" of Open MPI's shared-memory transport). A record is a `u32
 * length` word and its body, 8-byte aligned; the length word is written last
 * and is what publishes the record (as NCCL's LL protocol puts the flag in
 * the line it guards), so a consumer waiting for the next record spins on
 * the one cache line that record arrives in, and a small record crosses
 * between cores as one line. The word holds the body's bytes + 1, so an
 * empty record is published too. Before publishing, the producer zeroes the word
 * where its next record will start, so the consumer never takes what an
 * earlier lap left there for a length. A record that would cross the end of
 * the ring starts again at 0, published before the wrap mark that sends the
 * consumer there.
 *
 * The consumer frees records by moving `tail`, which the producer reads only
 * when the room it last saw is used up; the producer also moves `head`, the
 * word a consumer parks on (Atomics.waitAsync) once spinning stopped paying,
 * counting itself on RING_SLEEPERS first (see wait.ts's wake).
 * A process killed while writing leaves the length word unwritten, and its
 * consumer never sees half a record.
 *
 * Control words sit on cache lines of their own, so the producer's stores
 * to `head` do not keep invalidating the line the consumer writes `tail` to.
 *
 * A ring's first lap is at most FIRST_LAP_BYTES: position 0 lies that far
 * before the data's end, and the producer starts out seeing only that much
 * room. So the code of a lap's end (the wrap mark, the consumer following
 * it, the producer reading `tail` again) runs within a new ring's first
 * records, while V8 still collects type feedback, rather than first after
 * thousands of small records: there it met code TurboFan had compiled
 * without that branch, which deoptimized the mailbox's send and the ring's
 * reader in every rank thread, each compiled again on the cores the ranks
 * spin on (issue 42: a 2-rank job's 1,365th round trip in 64 KiB rings).
 */

/** Bytes of a ring's control block, before its data. */
export const RING_CONTROL_BYTES = 256;
/** Int32 indices of the control words: the producer moves `head`, the consumer `tail` (park on them). */
export const RING_HEAD = 0;
export const RING_TAIL = 16;
/** Waits parked on `head` (wait.ts's sleepers), so producers notify only when one may sleep. */
export const RING_SLEEPERS = 48;
/** Set by a producer that found no room; the consumer clears it and rings the producer's doorbell. */
const BLOCKED = 32;
const WRAP = -1;
/** What peekOffset returns for no record published, and for a record whose length is impossible. */
export const NO_RECORD = -1;
const BAD_RECORD = -2;
const ALIGN = 8;
const LENGTH_BYTES = 4;
/** The most bytes of a ring's first lap (see the file comment): a few dozen small records. */
export const FIRST_LAP_BYTES = 4096;

export class ByteRing {
  readonly #control: Int32Array;
  readonly #data: Uint8Array;
  readonly #words: Int32Array;
  readonly #view: DataView;
  readonly #size: number;
  /** Where position 0 (head and tail start there) lies in the data: FIRST_LAP_BYTES before its end. */
  readonly #origin: number;
  /** Producer: `tail` as last read; the room it leaves is used before `tail` is read again. */
  #tailSeen = 0;
  /**
   * Producer: the record reserve() made room for, which publish() publishes:
   * where it starts (-1: none), its body's bytes, where its wrap mark goes
   * (-1: none), and `head` once it is published.
   */
  #reservedStart = -1;
  #reservedBytes = 0;
  #wrapAt = -1;
  #nextHead = 0;
  /** The consumer's record being read: its end, applied by release(). */
  #pendingTail: number | undefined;
  #peekedBytes = 0;

  /** `memory` holds the control block and then `dataBytes` (a power of two) of records, zeroed when new. */
  constructor(memory: ArrayBufferLike, byteOffset: number, dataBytes: number) {
    if (dataBytes < 1024 || (dataBytes & (dataBytes - 1)) !== 0) {
      throw new RangeError(`ByteRing: data bytes must be a power of two of at least 1024, got ${dataBytes}`);
    }
    this.#control = new Int32Array(memory, byteOffset, RING_CONTROL_BYTES / 4);
    this.#data = new Uint8Array(memory, byteOffset + RING_CONTROL_BYTES, dataBytes);
    this.#words = new Int32Array(memory, byteOffset + RING_CONTROL_BYTES, dataBytes / 4);
    this.#view = new DataView(memory, byteOffset + RING_CONTROL_BYTES, dataBytes);
    this.#size = dataBytes;
    this.#origin = Math.max(0, dataBytes - FIRST_LAP_BYTES);
    // Seen `origin` behind: the room left looks used up where the first lap ends.
    this.#tailSeen = (Atomics.load(this.#control, RING_TAIL) - this.#origin) >>> 0;
  }

  /** Where position `position` (a head or tail) lies in the data. */
  #offset(position: number): number {
    return (position + this.#origin) & (this.#size - 1);
  }

  /** The control block's words, for parking on RING_HEAD or RING_TAIL. */
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
    let offset = this.reserve(bodyBytes);
    if (offset < 0) return false;
    for (const part of parts) {
      this.#data.set(part, offset);
      offset += part.length;
    }
    this.publish();
    return true;
  }

  /**
   * Producer: room for a record of `bodyBytes`, whose body the caller writes
   * into `data` (or `view`) at the offset returned, then publishes with
   * publish(); -1 (nothing reserved) when the ring has no room now. For
   * records assembled in place, with no copy of parts made first.
   */
  reserve(bodyBytes: number): number {
    if (bodyBytes > this.maxRecordBytes) {
      throw new RangeError(`ByteRing: a record of ${bodyBytes} bytes exceeds ${this.maxRecordBytes}`);
    }
    const head = Atomics.load(this.#control, RING_HEAD) >>> 0;
    const need = align(LENGTH_BYTES + bodyBytes);
    const at = this.#offset(head);
    const skip = at + need > this.#size ? this.#size - at : 0;
    // The record, and the zeroed word after it where the next one will start.
    const wanted = skip + need + ALIGN;
    if (wanted > this.#size - ((head - this.#tailSeen) >>> 0)) {
      this.#tailSeen = Atomics.load(this.#control, RING_TAIL) >>> 0;
      if (wanted > this.#size - ((head - this.#tailSeen) >>> 0)) return -1;
    }
    const start = skip > 0 ? 0 : at;
    this.#reservedStart = start;
    this.#reservedBytes = bodyBytes;
    this.#wrapAt = skip > 0 ? at : -1;
    this.#nextHead = (head + skip + need) | 0;
    return start + LENGTH_BYTES;
  }

  /** Producer: publishes the record reserve() made room for, once its body is written. */
  publish(): void {
    const start = this.#reservedStart;
    if (start < 0) throw new Error('ByteRing.publish: no record was reserved');
    // The word where the next record will start.
    this.#words[this.#offset(this.#nextHead) >> 2] = 0;
    Atomics.store(this.#words, start >> 2, this.#reservedBytes + 1);
    if (this.#wrapAt >= 0) Atomics.store(this.#words, this.#wrapAt >> 2, WRAP);
    Atomics.store(this.#control, RING_HEAD, this.#nextHead);
    this.#reservedStart = -1;
  }

  /** Producer: marks that it waits for room (cleared by the consumer as it frees records). */
  markBlocked(): void {
    Atomics.store(this.#control, BLOCKED, 1);
  }

  /** Consumer: whether a producer waits for room, clearing the mark. */
  takeBlocked(): boolean {
    return Atomics.load(this.#control, BLOCKED) === 1 && Atomics.exchange(this.#control, BLOCKED, 0) === 1;
  }

  /** Consumer: whether a record is there to read. */
  hasRecord(): boolean {
    return Atomics.load(this.#words, this.nextWord) !== 0;
  }

  /**
   * Consumer: the word of `records` the next record's length arrives in:
   * nonzero once there is something to read. What a consumer spins on.
   */
  get nextWord(): number {
    return this.#offset(Atomics.load(this.#control, RING_TAIL)) >> 2;
  }

  /** The records' memory as words (see nextWord). */
  get records(): Int32Array {
    return this.#words;
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
    let tail = Atomics.load(this.#control, RING_TAIL) >>> 0;
    let at = this.#offset(tail);
    let word = Atomics.load(this.#words, at >> 2);
    if (word === 0) return NO_RECORD;
    if (word === WRAP) {
      tail = (tail + this.#size - at) >>> 0;
      at = 0;
      word = Atomics.load(this.#words, 0);
    }
    const length = word - 1;
    this.#peekedBytes = length;
    if (length < 0 || length > this.maxRecordBytes || at + LENGTH_BYTES + length > this.#size)
      return BAD_RECORD;
    this.#pendingTail = (tail + align(LENGTH_BYTES + length)) | 0;
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
