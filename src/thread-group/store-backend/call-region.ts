/**
 * CallRegion: where the ranks of one group that map common memory meet for
 * small collectives, in one region (call-region-memory.ts: the job's arena
 * for thread ranks, a file of the job directory for process ranks of one
 * node), instead of every rank reading every peer's value through the keyed
 * store: N arrivals and one wake-up of all waiters per call, not N² reads
 * and wake-ups (Open MPI's coll/sm idea).
 *
 * Calls take slot seq % SLOTS, so SLOTS calls of one group may be in flight
 * at once; a slot serves its next call (cycle) once every rank has left the
 * previous one. Each rank writes a record into the slot: what kind of call it
 * makes (served here, served by the keyed store, or failed locally), its call
 * signature, and its data. Every collective on the group takes its slot, even
 * one the keyed store serves (it only passes through, without waiting), so
 * slots stay in step on every rank and a rank that takes the region while a
 * peer takes the store (a mismatch of sizes) is caught here. The last rank to
 * arrive judges the records, reduces the data in rank order when every rank
 * made the same region call (so all get identical bits), and bumps the slot's
 * ready word once, waking every waiter with one Atomics.notify (where any
 * sleeps: waits that may sleep count themselves on the word beside it).
 *
 * A tensor larger than a record goes through the slot in chunks of a
 * record, one after another within the call (the first one's arrivals
 * compare the calls as above), and its ranks share each chunk's reduction
 * out, as Open MPI's coll/sm does: once every rank brought the chunk, each
 * reduces its own share of the elements (in rank order, as above) into the
 * result, and once every share is there each copies the chunk out. A rank
 * brings the next chunk only after it copied the last one out, and no rank
 * reduces a chunk before every rank brought it, so no record or result is
 * written while another rank still reads it.
 *
 * A zero-filled region is a valid empty one, so whichever rank carves it
 * needs to write nothing first.
 */
import type { JobStop } from '../../runtime/abort-word.ts';
import { FNV_PRIME, fnv1a } from '../../runtime/fnv1a.ts';
import { decodeText, encodeBounded, MAX_TAG_BYTES } from '../../runtime/store-limits.ts';
import { deadlineAfter, pollUntil, waitBriefly } from '../../runtime/wait.ts';
import { arrayConstructor, type DType, itemSize, type TypedArray } from '../../tensor/dtype.ts';
import { checkOperands, reduceCheckedArrays } from '../../tensor/reduce-kernels.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { copyBytes } from '../../tensor/shared-copy.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { type CallInfo, type CallMismatchError, COMPLETED, type GroupView } from '../backend.ts';
import { abandonedError, layoutMismatchError, mismatchError, ranksText } from './call-failure.ts';
import type { CallRegionMemory } from './call-region-memory.ts';
import { waitMonitored } from './monitored-wait.ts';

/** Calls of one group that may be in flight at once before the next waits for a slot. */
export const SLOTS = 4;
/**
 * The largest host tensor served here, by the group's size and whether its
 * members can read each other's tensors in place (CallRegionMemory.copiesOnly),
 * and the most a record holds (a larger tensor goes in chunks of that).
 * Above the largest the keyed store's reduce-scatter serves the call. Here a
 * call costs two copies of the tensor on every rank, and the keyed store's
 * exchanges a handshake each way between every two ranks for each; measured
 * on 2 cores: between 2 ranks, in a job's calls 50 to 250, at 1 MiB the
 * region took 240-290 µs where the keyed rounds took 470-730 (threads and
 * processes); at 4 MiB the keyed rounds win between threads (they read each
 * other's memory in place: 690 against 960 µs), and lose between processes
 * at every size, whose keyed values are copies (warm: 4 MiB 410-470 against
 * 1,590 µs, 16 MiB 2.1-2.3 against 4.6 ms). Between 8 thread ranks, 64 KiB
 * 105-125 against 2,810 µs, 256 KiB 1.2 against 3.9 ms, 1 MiB 1.1-1.3
 * against 2.8 ms; between 16, 64 KiB 0.27 against 12 ms.
 */
const FEW_RANKS_MAX = 4;
const SOME_RANKS_MAX = 16;
export function regionMaxBytes(size: number, copiesOnly: boolean): number {
  if (size > SOME_RANKS_MAX) return 16 << 10;
  return copiesOnly && size <= FEW_RANKS_MAX ? Number.POSITIVE_INFINITY : 1 << 20;
}

export function regionChunkBytes(size: number): number {
  if (size <= FEW_RANKS_MAX) return 256 << 10;
  return size <= SOME_RANKS_MAX ? 64 << 10 : 16 << 10;
}

/**
 * What a rank's record says it does in its slot's call; `declined`: in the region for a call whose
 * data did not fit this rank's record (see decline).
 */
export const KIND = { region: 1, keyed: 2, abandoned: 3, declined: 4 } as const;
type Kind = (typeof KIND)[keyof typeof KIND];

const inRegion = (kind: number) => kind === KIND.region || kind === KIND.declined;

/** Whether two records' kinds make one call: alike, or a declined one beside one in the region (see decline). */
function sameKind(a: number, b: number): boolean {
  return a === b || (inRegion(a) && inRegion(b));
}
/** The last arrival's verdict on a slot's call. */
export const OUTCOME = { reduced: 1, keyed: 2, mismatch: 3, abandoned: 4, declined: 5 } as const;

/*
 * Layout. Every rank reads what another wrote once per call, and each line
 * that moves between cores costs as much as a small call's own work: so
 * what a call reads of another rank comes in as few cache lines as it can.
 * A slot's words are followed by its result and a record's words by its
 * data, in the same line, so a small call's verdict and result, or a rank's
 * arrival, call and data, are one line each; the signature is compared by
 * its hashes in the record's words, and its text (after the data) is read
 * only to word a mismatch.
 */
const LINE_BYTES = 64;
const lines = (bytes: number) => Math.ceil(bytes / LINE_BYTES) * LINE_BYTES;
/**
 * Slot words: the cycle it serves and the ready cycle + 1, arrivals (of
 * every chunk of the call) and shares of chunks reduced, how many waits on
 * each of these may sleep (see wake; each two words after the word it counts
 * for), departures, the outcome.
 */
const S = {
  open: 0,
  ready: 1,
  openSleepers: 2,
  readySleepers: 3,
  arrived: 4,
  reduced: 5,
  arrivedSleepers: 6,
  reducedSleepers: 7,
  departed: 8,
  outcome: 9,
} as const;
/** From a waited word to the word its sleepers are counted on. */
const SLEEPERS_AFTER = S.openSleepers - S.open;
const SLOT_HEADER_BYTES = 48;

/**
 * Record words: the cycle + 1 the rank arrived for, its kind, its text's
 * length, the text's two 32-bit hashes, the last chunk it brought, the
 * chunks whose share it reduced.
 */
const R = { cycle: 0, kind: 1, textLength: 2, hash: 3, hash2: 4, chunk: 5, shares: 6 } as const;
const RECORD_HEADER_BYTES = 32;

/** How long a wait in the region blocks its thread before it parks on the event loop (see waitForWord). */
const BLOCK_MS = 10;
/** Encoded signatures kept per group: a program repeats a handful of calls. */
const SIGNATURES_KEPT = 64;

/** How many times the call's slot served a call before it. */
function cycleOf(call: CallInfo, slot: number): number {
  return (call.seq - slot) / SLOTS;
}

/** Bytes of a slot's words and result, and of a record's words, data and text, in a group of `size`. */
function slotFrontBytes(size: number): number {
  return lines(SLOT_HEADER_BYTES + regionChunkBytes(size));
}

function recordBytes(size: number): number {
  return lines(RECORD_HEADER_BYTES + regionChunkBytes(size) + MAX_TAG_BYTES);
}

function slotBytes(size: number): number {
  return slotFrontBytes(size) + size * recordBytes(size);
}

/** Bytes of the region a group of `size` ranks needs. */
export function regionBytes(size: number): number {
  return SLOTS * slotBytes(size);
}

/** A record's text, encoded, with the hashes calls are compared by (see #sameCall). */
interface RecordText {
  bytes: Uint8Array;
  hash: number;
  hash2: number;
}

/** A failure's text as a record holds it (no hashes: an abandoned record is never compared). */
function errorText(message: string): RecordText {
  return { bytes: encodeBounded(message, MAX_TAG_BYTES), hash: 0, hash2: 0 };
}

/** A slot's reduction operands as typed arrays, kept while calls repeat the same dtype and length. */
interface Operands {
  dtype: DType;
  numel: number;
  inputs: TypedArray[];
  out: TypedArray;
}

/** What a region not mapped yet reads as: nothing. */
const UNMAPPED = new ArrayBuffer(0);

export class CallRegion {
  readonly #group: GroupView;
  readonly #memory: CallRegionMemory;
  readonly #abort: JobStop | undefined;
  readonly #mayBlock: (() => boolean) | undefined;
  /** The region, once mapped (a process group's once its rank 0 made it): the first call waits for it. */
  #mapped = false;
  #buffer: ArrayBufferLike = UNMAPPED;
  #base = 0;
  #words: Int32Array = new Int32Array(UNMAPPED);
  #bytes: Uint8Array = new Uint8Array(UNMAPPED);
  readonly #slotBytes: number;
  readonly #slotFrontBytes: number;
  readonly #recordBytes: number;
  /** The largest tensor this group's calls meet here with (regionMaxBytes). */
  readonly maxBytes: number;
  /** The most a record holds: a larger tensor goes in chunks of this (regionChunkBytes). */
  readonly chunkBytes: number;
  readonly #signatures = new Map<string, RecordText>();
  readonly #operands: Array<Operands | undefined> = new Array(SLOTS);
  /** Per slot, the text this rank's record holds (the encoded signature or error it last wrote there). */
  readonly #written: Array<RecordText | undefined> = new Array(SLOTS);
  /** What #reachedSoon waits for, read by #isTarget (made once, not per wait). */
  #target = 0;
  readonly #isTarget = (value: number) => value === this.#target;

  constructor(memory: CallRegionMemory, group: GroupView) {
    this.#group = group;
    this.#memory = memory;
    this.#abort = memory.abort;
    this.#mayBlock = memory.mayBlock;
    this.#map();
    this.#slotBytes = slotBytes(group.size);
    this.#slotFrontBytes = slotFrontBytes(group.size);
    this.#recordBytes = recordBytes(group.size);
    this.maxBytes = regionMaxBytes(group.size, memory.copiesOnly);
    this.chunkBytes = regionChunkBytes(group.size);
  }

  /** This rank's group rank. */
  get rank(): number {
    return this.#group.rank;
  }

  get size(): number {
    return this.#group.size;
  }

  /** Byte offset (in the region) of group rank `p`'s data in `slot`. */
  #dataOffset(slot: number, p: number): number {
    return this.#recordOffset(slot, p) + RECORD_HEADER_BYTES;
  }

  /** Byte offset (in the region) of `slot`'s result. */
  #resultOffset(slot: number): number {
    return this.#slotOffset(slot) + SLOT_HEADER_BYTES;
  }

  /**
   * Waits until the call's slot is free for it, then writes this rank's
   * record (its kind, and its signature, or for an abandoned call its error);
   * the data, if any, goes in (copyIn) before `arrive`. Returns the slot,
   * without a promise when the slot is free within the brief wait.
   */
  enter(call: CallInfo, kind: Kind, text: string): number | Promise<number> {
    // A region made since this rank's group was (by the group's rank 0) is mapped here, at once.
    if (!this.#mapped && !this.#map()) return this.#mapping(call).then(() => this.enter(call, kind, text));
    const slot = call.seq % SLOTS;
    const open = this.#slotWord(slot, S.open);
    if (this.#reachedSoon(open, cycleOf(call, slot), call)) return this.#take(call, slot, kind, text);
    return this.#wait(open, cycleOf(call, slot), call, () =>
      call.seq >= SLOTS
        ? `every rank to finish call #${call.seq - SLOTS}, whose place in the group's region it takes`
        : 'the group region',
    ).then(() => this.#take(call, slot, kind, text));
  }

  /** Maps the region where it is there; whether it is mapped. */
  #map(): boolean {
    const region = this.#memory.bytes();
    if (region === undefined) return false;
    const { buffer, byteOffset, byteLength } = region;
    this.#buffer = buffer;
    this.#base = byteOffset;
    this.#words = new Int32Array(buffer, byteOffset, byteLength >> 2);
    this.#bytes = new Uint8Array(buffer, byteOffset, byteLength);
    this.#mapped = true;
    return true;
  }

  /** Resolves once the region is mapped: its owner (the group's rank 0) made it. */
  #mapping(call: CallInfo): Promise<void> {
    return pollUntil(() => this.#map() || undefined, {
      deadline: deadlineAfter(call.timeoutMs),
      abort: this.#abort,
      describe: () =>
        `${call.signature}: waiting for ${ranksText(this.#group, [0])} to make the group's region`,
    }).then(() => {});
  }

  /** This rank is done with the region (its group destroyed). */
  release(): void {
    this.#memory.release();
  }

  #take(call: CallInfo, slot: number, kind: Kind, text: string): number {
    this.#write(slot, kind, kind === KIND.abandoned ? errorText(text) : this.#signature(text));
    const record = this.#recordOffset(slot, this.#group.rank) >> 2;
    this.#words[record + R.chunk] = 0;
    this.#words[record + R.shares] = 0;
    Atomics.store(this.#words, record + R.cycle, cycleOf(call, slot) + 1);
    return slot;
  }

  #write(slot: number, kind: Kind, text: RecordText): void {
    const record = this.#recordOffset(slot, this.#group.rank) >> 2;
    // A loop of one call writes the same signature into its slots over and over; only this rank writes its record.
    if (this.#written[slot] !== text) {
      this.#bytes.set(text.bytes, this.#textOffset(record));
      this.#words[record + R.textLength] = text.bytes.length;
      this.#words[record + R.hash] = text.hash;
      this.#words[record + R.hash2] = text.hash2;
      this.#written[slot] = text;
    }
    Atomics.store(this.#words, record + R.kind, kind);
  }

  /** Counts this rank in; true for the last to arrive, which must judge (and maybe reduce) and announce. */
  arrive(slot: number): boolean {
    return Atomics.add(this.#words, this.#slotWord(slot, S.arrived), 1) === this.#group.size - 1;
  }

  /**
   * The last arrival's verdict: a rank that failed locally first, then any disagreement of kind or
   * signature, then a rank whose data did not fit (the call goes to the keyed store on every rank).
   */
  judge(slot: number): number {
    let outcome: number = OUTCOME.reduced;
    let declined = false;
    const first = this.#recordOffset(slot, 0) >> 2;
    for (let p = 0; p < this.#group.size; p++) {
      const record = this.#recordOffset(slot, p) >> 2;
      if (this.#words[record + R.kind] === KIND.abandoned) return OUTCOME.abandoned;
      if (!this.#sameCall(record, first)) outcome = OUTCOME.mismatch;
      if (this.#words[record + R.kind] === KIND.declined) declined = true;
    }
    if (outcome === OUTCOME.reduced && declined) return OUTCOME.declined;
    if (outcome === OUTCOME.reduced && this.#words[first + R.kind] === KIND.keyed) return OUTCOME.keyed;
    return outcome;
  }

  /** result = op(every rank's data), in rank order; only when judge said `reduced`. */
  reduce(slot: number, op: ReduceOp, dtype: DType, numel: number): void {
    let operands = this.#operands[slot];
    if (operands?.dtype !== dtype || operands.numel !== numel) {
      const Typed = arrayConstructor(dtype);
      // The constructors are typed for ArrayBuffer; a SharedArrayBuffer backs them the same way.
      const buffer = this.#buffer as ArrayBuffer;
      const view = (offset: number) => new Typed(buffer, this.#base + offset, numel) as TypedArray;
      const inputs: TypedArray[] = [];
      for (let p = 0; p < this.#group.size; p++) inputs.push(view(this.#dataOffset(slot, p)));
      operands = { dtype, numel, inputs, out: view(this.#resultOffset(slot)) };
      checkOperands(dtype, operands.out, inputs, 'the group region');
      this.#operands[slot] = operands;
    }
    // ThreadGroup checked the op for the dtype.
    reduceCheckedArrays(op, dtype, operands.out, operands.inputs);
  }

  /** Copies `length` of `tensor`'s bytes from `offset` on (the call's data or a chunk of it) into this rank's record. */
  copyIn(slot: number, tensor: Tensor, offset: number, length: number): void {
    copyBytes(this.#bytes, this.#dataOffset(slot, this.#group.rank), tensor.bytes(), offset, length);
  }

  /** Copies the slot's result into `tensor`'s bytes from `offset` on (`length` of them: the call's data or chunk). */
  copyResult(slot: number, tensor: Tensor, offset: number, length: number): void {
    copyBytes(tensor.bytes(), offset, this.#bytes, this.#resultOffset(slot), length);
  }

  /** Copies `bytes` into this rank's record, `at` bytes into its data: one of several tensors a call brings. */
  bring(slot: number, at: number, bytes: Uint8Array): void {
    copyBytes(this.#bytes, this.#dataOffset(slot, this.#group.rank) + at, bytes, 0, bytes.length);
  }

  /**
   * Copies `into.length` bytes of group rank `p`'s record data, from `at` on, into `into`: what a
   * call takes straight from its peers' records, between the verdict and this rank's departure.
   */
  take(slot: number, p: number, at: number, into: Uint8Array): void {
    copyBytes(into, 0, this.#bytes, this.#dataOffset(slot, p) + at, into.length);
  }

  /** Word `index` (unsigned 32-bit) of group rank `p`'s record data: a table a call brings ahead of its data. */
  dataWord(slot: number, p: number, index: number): number {
    return this.#words[(this.#dataOffset(slot, p) >> 2) + index] >>> 0;
  }

  /** The error of a rank that expects `want` from group rank `producer`, which brought `sent`. */
  layoutMismatch(call: CallInfo, producer: number, want: string, sent: string): CallMismatchError {
    return layoutMismatchError(this.#group, call, want, producer, sent);
  }

  /**
   * out = op(every rank's record data from element `from` on, `out.length` elements of `dtype`), in
   * rank order: one rank's piece of a reduction none of its peers needs (reduceScatter's).
   */
  reduceRecords(slot: number, op: ReduceOp, dtype: DType, out: TypedArray, from: number): void {
    const Typed = arrayConstructor(dtype);
    const buffer = this.#buffer as ArrayBuffer;
    const start = this.#base + from * itemSize(dtype);
    const inputs: TypedArray[] = [];
    for (let p = 0; p < this.#group.size; p++)
      inputs.push(new Typed(buffer, start + this.#dataOffset(slot, p), out.length) as TypedArray);
    // ThreadGroup checked the op for the dtype.
    reduceCheckedArrays(op, dtype, out, inputs);
  }

  /**
   * Counts this rank in for chunk `chunk` of the call in `slot` (from 1:
   * chunk 0 came with `arrive`), its data in its record, and resolves once
   * every rank brought it.
   */
  bringChunk(slot: number, call: CallInfo, chunk: number, chunks: number): Promise<void> {
    return this.#countIn(
      slot,
      call,
      R.chunk,
      chunk,
      S.arrived,
      chunk + 1,
      () => `to bring chunk ${chunk + 1} of ${chunks}`,
    );
  }

  /**
   * result = op(every rank's data) over this rank's share of the `numel`
   * elements of the chunk in the records (an nth, in rank order), in rank
   * order as `reduce` does; the rest is other ranks' to reduce.
   */
  reduceShare(slot: number, op: ReduceOp, dtype: DType, numel: number): void {
    const n = this.#group.size;
    const from = Math.floor((numel * this.#group.rank) / n);
    const length = Math.floor((numel * (this.#group.rank + 1)) / n) - from;
    if (length === 0) return;
    const Typed = arrayConstructor(dtype);
    const at = this.#base + this.#resultOffset(slot) + from * itemSize(dtype);
    this.reduceRecords(
      slot,
      op,
      dtype,
      new Typed(this.#buffer as ArrayBuffer, at, length) as TypedArray,
      from,
    );
  }

  /** Counts this rank's share of chunk `chunk` reduced, and resolves once every share of it is. */
  shareReduced(slot: number, call: CallInfo, chunk: number, chunks: number): Promise<void> {
    return this.#countIn(
      slot,
      call,
      R.shares,
      chunk + 1,
      S.reduced,
      chunk + 1,
      () => `to reduce its share of chunk ${chunk + 1} of ${chunks}`,
    );
  }

  /**
   * Sets word `mark` of this rank's record in `slot` to `value`, adds this
   * rank to the slot's counter `counter`, and resolves once every rank added
   * itself `rounds` times: the last to add wakes the others. A wait that
   * times out names the ranks whose mark is still below `value`, and what
   * they did not do (`what`, of the call's data).
   */
  #countIn(
    slot: number,
    call: CallInfo,
    mark: number,
    value: number,
    counter: number,
    rounds: number,
    what: () => string,
  ): Promise<void> {
    const record = this.#recordOffset(slot, this.#group.rank) >> 2;
    Atomics.store(this.#words, record + mark, value);
    const index = this.#slotWord(slot, counter);
    const target = rounds * this.#group.size;
    if (Atomics.add(this.#words, index, 1) === target - 1) {
      this.#memory.wake(this.#words, index, index + SLEEPERS_AFTER);
      return COMPLETED;
    }
    if (this.#reachedSoon(index, target, call)) return COMPLETED;
    const missing = () => this.#behind(slot, mark, value);
    return this.#wait(
      index,
      target,
      call,
      () => `${ranksText(this.#group, missing())} ${what()} of the call's data`,
      missing,
    );
  }

  /** Publishes the verdict on `call` and wakes every rank waiting for it at once. */
  announce(slot: number, call: CallInfo, outcome: number): void {
    this.#words[this.#slotWord(slot, S.outcome)] = outcome;
    const ready = this.#slotWord(slot, S.ready);
    Atomics.store(this.#words, ready, cycleOf(call, slot) + 1);
    this.#memory.wake(this.#words, ready, this.#slotWord(slot, S.readySleepers));
  }

  /** A call the keyed store serves takes its slot too, without waiting for the others (see above). */
  pass(call: CallInfo): Promise<void> {
    return this.#passThrough(call, KIND.keyed, call.signature);
  }

  /**
   * A call whose ranks may bring different amounts (allToAll), from a rank whose data does not fit
   * its record: it passes through as a keyed call does, and the verdict sends its peers that came
   * to the region to the keyed store too (OUTCOME.declined).
   */
  decline(call: CallInfo): Promise<void> {
    return this.#passThrough(call, KIND.declined, call.signature);
  }

  /**
   * A call that failed this rank's local checks leaves its error in its slot,
   * for the peers that came to the region; those in the keyed store are told there.
   */
  abandon(call: CallInfo, error: Error): Promise<void> {
    return this.#passThrough(call, KIND.abandoned, error.message);
  }

  async #passThrough(call: CallInfo, kind: Kind, text: string): Promise<void> {
    const slot = await this.enter(call, kind, text);
    if (this.arrive(slot)) this.announce(slot, call, this.judge(slot));
    this.depart(slot);
  }

  /**
   * The brief synchronous wait (waitForWord's spin, and its yield or block
   * where every rank of the group is in the call) for word `index` to hold
   * `target`: what a small call's waits come to when the ranks keep pace,
   * without a promise or a closure per call.
   */
  #reachedSoon(index: number, target: number, call: CallInfo): boolean {
    // Where the ranks keep pace the word is there already: no clock reading for a deadline.
    if (Atomics.load(this.#words, index) === target) return true;
    this.#target = target;
    return waitBriefly(
      this.#words,
      index,
      this.#isTarget,
      deadlineAfter(call.timeoutMs),
      this.#abort,
      this.#blockMs(call),
      index + SLEEPERS_AFTER,
    );
  }

  /**
   * How long a wait of `call` may keep its thread (WaitOptions.blockMs): not
   * where other ranks share the thread, nor in the group's first call, whose
   * ranks arrive as they finish setting up (threads starting, modules
   * loading): there a first arrival that gave its core away in a loop took
   * it from the peers still loading, for up to BLOCK_MS a wait.
   */
  #blockMs(call: CallInfo): number | undefined {
    return call.seq > 0 && this.#mayBlock?.() ? BLOCK_MS : undefined;
  }

  /** Waits for the verdict on the call in `slot`; returns it, without a promise when it comes within the brief wait. */
  outcome(slot: number, call: CallInfo): number | Promise<number> {
    const cycle = cycleOf(call, slot);
    const ready = this.#slotWord(slot, S.ready);
    const verdict = this.#slotWord(slot, S.outcome);
    try {
      if (this.#reachedSoon(ready, cycle + 1, call)) return this.#words[verdict];
    } catch (error) {
      this.#abandonAfter(slot, error as Error);
    }
    // Not arrived for `cycle`: a record holds the cycle + 1 its rank last arrived for.
    const missing = () => this.#behind(slot, R.cycle, cycle + 1);
    return this.#wait(ready, cycle + 1, call, () => ranksText(this.#group, missing()), missing).then(
      () => this.#words[verdict],
      (error: Error) => this.#abandonAfter(slot, error),
    );
  }

  /** A rank still to come must not complete the call without this one: it fails with this rank's error. */
  #abandonAfter(slot: number, error: Error): never {
    this.#write(slot, KIND.abandoned, errorText(error.message));
    throw error;
  }

  /** Leaves the slot (also after a failure); the last to leave frees it for the call SLOTS later. */
  depart(slot: number): void {
    const w = this.#words;
    if (Atomics.add(w, this.#slotWord(slot, S.departed), 1) !== this.#group.size - 1) return;
    w[this.#slotWord(slot, S.arrived)] = 0;
    w[this.#slotWord(slot, S.reduced)] = 0;
    w[this.#slotWord(slot, S.departed)] = 0;
    const open = this.#slotWord(slot, S.open);
    Atomics.add(w, open, 1);
    this.#memory.wake(w, open, this.#slotWord(slot, S.openSleepers));
  }

  /** Group ranks whose record in `slot` says they serve the call through the keyed store. */
  keyedPeers(slot: number): number[] {
    const peers: number[] = [];
    for (let p = 0; p < this.#group.size; p++) {
      const record = this.#recordOffset(slot, p) >> 2;
      const kind = this.#words[record + R.kind];
      if (p !== this.#group.rank && (kind === KIND.keyed || kind === KIND.declined)) peers.push(p);
    }
    return peers;
  }

  /** The error of a call whose verdict was a mismatch or a rank's local failure, in this rank's words. */
  failure(slot: number, call: CallInfo, outcome: number): Error {
    const me = this.#recordOffset(slot, this.#group.rank) >> 2;
    for (let p = 0; p < this.#group.size; p++) {
      const record = this.#recordOffset(slot, p) >> 2;
      if (outcome === OUTCOME.abandoned && this.#words[record + R.kind] === KIND.abandoned) {
        return abandonedError(this.#group, call, p, this.#text(record));
      }
      if (outcome === OUTCOME.mismatch && !this.#sameCall(record, me)) {
        return mismatchError(this.#group, call, call.signature, p, this.#text(record));
      }
    }
    // The outcome word says a record holds the failure: only a bug in tensorcomm leaves none.
    return new Error(`${call.signature}: the group region holds no failure for call #${call.seq}`);
  }

  /**
   * Whether two records make the same call: kind, and the signature's length
   * and two 32-bit hashes (a 64-bit fingerprint: two different signatures
   * agree in all three with a chance of about one in 2^64), all in the
   * records' first line, so the texts are not read.
   */
  #sameCall(a: number, b: number): boolean {
    const w = this.#words;
    return (
      sameKind(w[a + R.kind], w[b + R.kind]) &&
      w[a + R.textLength] === w[b + R.textLength] &&
      w[a + R.hash] === w[b + R.hash] &&
      w[a + R.hash2] === w[b + R.hash2]
    );
  }

  #text(record: number): string {
    const at = this.#textOffset(record);
    return decodeText(this.#bytes, at, at + this.#words[record + R.textLength]);
  }

  /** Group ranks whose record's word `word` in `slot` is still below `count`. */
  #behind(slot: number, word: number, count: number): number[] {
    const behind: number[] = [];
    for (let p = 0; p < this.#group.size; p++) {
      const record = this.#recordOffset(slot, p) >> 2;
      if (Atomics.load(this.#words, record + word) < count) behind.push(p);
    }
    return behind;
  }

  #signature(signature: string): RecordText {
    let encoded = this.#signatures.get(signature);
    if (encoded === undefined) {
      if (this.#signatures.size === SIGNATURES_KEPT) this.#signatures.clear();
      const bytes = encodeBounded(signature, MAX_TAG_BYTES);
      encoded = { bytes, hash: fnv1a(bytes) | 0, hash2: fnv1a(bytes, FNV_PRIME) | 0 };
      this.#signatures.set(signature, encoded);
    }
    return encoded;
  }

  /**
   * Waits until word `index` holds `target`, within the call's timeout, ending
   * with the job's abort or the CommTimeoutError (with hang report) a keyed
   * wait ends with. A monitored call waits in slices and, between them, says
   * whom it waits for (`waitingFor`, as the monitor's reports phrase it:
   * "group rank 2 (global rank 2)") and fails at once when one of `waitedFor`
   * failed the call or left.
   */
  #wait(
    index: number,
    target: number,
    call: CallInfo,
    waitingFor: () => string,
    waitedFor?: () => number[],
  ): Promise<void> {
    return waitMonitored(this.#words, index, (value) => value === target, {
      group: this.#group,
      call,
      abort: this.#abort,
      deadline: deadlineAfter(call.timeoutMs),
      waitingFor,
      waitedFor,
      // Every rank of the group is in this call: waking the thread itself beats an event-loop turn.
      blockMs: this.#blockMs(call),
      sleepers: index + SLEEPERS_AFTER,
      park: this.#memory.park,
    });
  }

  #slotOffset(slot: number): number {
    return slot * this.#slotBytes;
  }

  #slotWord(slot: number, word: number): number {
    return (this.#slotOffset(slot) >> 2) + word;
  }

  #recordOffset(slot: number, p: number): number {
    return this.#slotOffset(slot) + this.#slotFrontBytes + p * this.#recordBytes;
  }

  /** Byte offset (in the region) of the text of the record at word `record`. */
  #textOffset(record: number): number {
    return (record << 2) + RECORD_HEADER_BYTES + this.chunkBytes;
  }
}
