/**
 * The shared key table behind MemoryTensorStore: fixed-size slots in one
 * SharedArrayBuffer, chained hash buckets, a free list, all guarded by one
 * futex-style lock (critical sections are a few dozen loads and stores).
 * Consumers that arrive before the producer park on their bucket's epoch word,
 * which every publish into that bucket bumps.
 */
import type { AbortWord } from '../runtime/abort-word.ts';
import { fnv1a } from '../runtime/fnv1a.ts';
import {
  decodeText,
  encodeKey,
  MAX_ERROR_BYTES,
  MAX_KEY_BYTES,
  MAX_TAG_BYTES,
} from '../runtime/store-limits.ts';

/** Int32 word offsets inside a slot. */
export const W = {
  next: 0,
  hash: 1,
  keyLength: 2,
  consumers: 3,
  gets: 4,
  finished: 5,
  errorKind: 6,
  producerRank: 7,
  dtype: 8,
  ndim: 9,
  placement: 10,
  bufferOwner: 11,
  bufferId: 12,
  tagLength: 13,
  errorLength: 14,
} as const;

/** Float64 offsets inside a slot (after the 16 Int32 words above). */
const F64_BASE = 8;
export const F = { byteOffset: F64_BASE, nbytes: F64_BASE + 1, shape: F64_BASE + 2 } as const;

const KEY_OFFSET = 256;
const TAG_OFFSET = KEY_OFFSET + MAX_KEY_BYTES;
const ERROR_OFFSET = TAG_OFFSET + MAX_TAG_BYTES;
const HEADER_BYTES = ERROR_OFFSET + MAX_ERROR_BYTES;

/**
 * Where a value's bytes are (W.placement): a peer's shared buffer, the slot
 * itself, a GPU, or (views) a list of (buffer id, byte offset, byte length)
 * float64 triples in a peer's shared buffer, one per tensor of the value.
 */
export const PLACEMENT = { buffer: 0, inline: 1, device: 2, views: 3 } as const;

export const ERROR_NONE = 0;
export const ERROR_LOCAL = 1;
export const ERROR_MISMATCH = 2;

/** `fresh`: slots handed out at least once; the rest are free without a free-list entry, so a new table writes nothing. */
const GLOBAL = { lock: 0, freeHead: 1, freeEpoch: 2, fresh: 3 } as const;
const GLOBAL_WORDS = 4;

export interface SlotTableSpec {
  slots: number;
  buckets: number;
  inlineBytes: number;
}

export interface SharedSlotTable {
  spec: SlotTableSpec;
  buffer: SharedArrayBuffer;
}

export class SlotTable {
  readonly spec: SlotTableSpec;
  readonly buffer: SharedArrayBuffer;
  readonly slotBytes: number;
  readonly words: Int32Array;
  readonly f64: Float64Array;
  readonly bytes: Uint8Array;
  readonly #bucketHeads: number;
  readonly #bucketEpochs: number;
  readonly #slotsBase: number;

  static create(spec: SlotTableSpec): SharedSlotTable {
    const slotBytes = HEADER_BYTES + align(spec.inlineBytes, 64);
    const size = layoutBytes(spec) + spec.slots * slotBytes;
    // Zero-filled, it is an empty table: a job's first page faults come with its first keys, not all at start.
    return { spec, buffer: new SharedArrayBuffer(size) };
  }

  constructor(shared: SharedSlotTable) {
    this.spec = shared.spec;
    this.buffer = shared.buffer;
    this.slotBytes = HEADER_BYTES + align(this.spec.inlineBytes, 64);
    this.words = new Int32Array(this.buffer);
    this.f64 = new Float64Array(this.buffer);
    this.bytes = new Uint8Array(this.buffer);
    this.#bucketHeads = GLOBAL_WORDS;
    this.#bucketEpochs = GLOBAL_WORDS + this.spec.buckets;
    this.#slotsBase = layoutBytes(this.spec);
  }

  /** Byte offset of a slot's first byte. */
  slotBase(slot: number): number {
    return this.#slotsBase + slot * this.slotBytes;
  }

  word(slot: number, field: number): number {
    return (this.slotBase(slot) >> 2) + field;
  }

  f64Index(slot: number, field: number): number {
    return (this.slotBase(slot) >> 3) + field;
  }

  inlineOffset(slot: number): number {
    return this.slotBase(slot) + HEADER_BYTES;
  }

  keyBytes(key: string, where: () => string): Uint8Array {
    return encodeKey(key, where);
  }

  bucketOf(keyBytes: Uint8Array): { bucket: number; hash: number } {
    const hash = fnv1a(keyBytes) | 0;
    return { bucket: (hash >>> 0) % this.spec.buckets, hash };
  }

  bucketEpochIndex(bucket: number): number {
    return this.#bucketEpochs + bucket;
  }

  get freeEpochIndex(): number {
    return GLOBAL.freeEpoch;
  }

  /** Call with the lock held. Returns the slot holding the key, or -1. */
  find(keyBytes: Uint8Array, bucket: number, hash: number): number {
    const w = this.words;
    for (let link = w[this.#bucketHeads + bucket]; link !== 0; link = w[this.word(link - 1, W.next)]) {
      const slot = link - 1;
      if (w[this.word(slot, W.hash)] !== hash || w[this.word(slot, W.keyLength)] !== keyBytes.length)
        continue;
      const base = this.slotBase(slot) + KEY_OFFSET;
      let same = true;
      for (let i = 0; i < keyBytes.length && same; i++) same = this.bytes[base + i] === keyBytes[i];
      if (same) return slot;
    }
    return -1;
  }

  /** Call with the lock held. Takes a free slot and links it under the key, or returns -1 when full. */
  insert(keyBytes: Uint8Array, bucket: number, hash: number): number {
    const w = this.words;
    const head = w[GLOBAL.freeHead];
    let slot: number;
    if (head !== 0) {
      slot = head - 1;
      w[GLOBAL.freeHead] = w[this.word(slot, W.next)];
    } else if (w[GLOBAL.fresh] < this.spec.slots) slot = w[GLOBAL.fresh]++;
    else return -1;
    w.fill(0, this.word(slot, 0), this.word(slot, 16));
    w[this.word(slot, W.hash)] = hash;
    w[this.word(slot, W.keyLength)] = keyBytes.length;
    this.bytes.set(keyBytes, this.slotBase(slot) + KEY_OFFSET);
    w[this.word(slot, W.next)] = w[this.#bucketHeads + bucket];
    w[this.#bucketHeads + bucket] = slot + 1;
    return slot;
  }

  /** Call with the lock held. Unlinks the slot from its bucket and returns it to the free list. */
  remove(slot: number, bucket: number): void {
    const w = this.words;
    let prev = this.#bucketHeads + bucket;
    while (w[prev] !== slot + 1) prev = this.word(w[prev] - 1, W.next);
    w[prev] = w[this.word(slot, W.next)];
    w[this.word(slot, W.next)] = w[GLOBAL.freeHead];
    w[GLOBAL.freeHead] = slot + 1;
  }

  writeText(slot: number, which: 'tag' | 'error', text: Uint8Array): void {
    const offset = which === 'tag' ? TAG_OFFSET : ERROR_OFFSET;
    this.bytes.set(text, this.slotBase(slot) + offset);
    this.words[this.word(slot, which === 'tag' ? W.tagLength : W.errorLength)] = text.length;
  }

  readText(slot: number, which: 'tag' | 'error'): string {
    const offset = this.slotBase(slot) + (which === 'tag' ? TAG_OFFSET : ERROR_OFFSET);
    const length = this.words[this.word(slot, which === 'tag' ? W.tagLength : W.errorLength)];
    return decodeText(this.bytes, offset, offset + length);
  }

  /**
   * Futex-style mutex (Drepper's "mutex2"): 0 free, 1 locked, 2 locked with
   * waiters. The bounded Atomics.wait lets a rank notice a job abort even if
   * the holder died mid-section.
   */
  lock(abort: AbortWord | undefined): void {
    const w = this.words;
    let state = Atomics.compareExchange(w, GLOBAL.lock, 0, 1);
    for (let spin = 0; state !== 0 && spin < 200; spin++)
      state = Atomics.compareExchange(w, GLOBAL.lock, 0, 1);
    if (state === 0) return;
    if (state !== 2) state = Atomics.exchange(w, GLOBAL.lock, 2);
    while (state !== 0) {
      Atomics.wait(w, GLOBAL.lock, 2, 10);
      abort?.throwIfAborted();
      state = Atomics.exchange(w, GLOBAL.lock, 2);
    }
  }

  unlock(): void {
    if (Atomics.sub(this.words, GLOBAL.lock, 1) !== 1) {
      Atomics.store(this.words, GLOBAL.lock, 0);
      Atomics.notify(this.words, GLOBAL.lock, 1);
    }
  }

  /** Call with the lock held. Slots not on the free list. */
  countInUse(): number {
    let free = 0;
    for (let link = this.words[GLOBAL.freeHead]; link !== 0; link = this.words[this.word(link - 1, W.next)])
      free++;
    return this.words[GLOBAL.fresh] - free;
  }

  /** Wakes everything parked on this table (used when the job aborts). */
  wakeAll(): void {
    for (let b = 0; b < this.spec.buckets; b++) Atomics.notify(this.words, this.bucketEpochIndex(b));
    Atomics.notify(this.words, GLOBAL.freeEpoch);
    for (let s = 0; s < this.spec.slots; s++) Atomics.notify(this.words, this.word(s, W.finished));
  }
}

function align(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

function layoutBytes(spec: SlotTableSpec): number {
  return align((GLOBAL_WORDS + 2 * spec.buckets) * 4, 64);
}
