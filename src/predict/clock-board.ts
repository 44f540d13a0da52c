/**
 * ClockBoard: where the thread ranks of one group meet in predict mode for a
 * collective's start, in shared memory (TensorStore.sharedRegion), without a
 * call of their own. Each member posts its clock and its bytes for the
 * group's next collective as it issues it, and reads every member's once the
 * collective ended, by which time the members that took part in it have
 * posted: a collective in which every member hears from every other
 * (allReduce, allGather, barrier, ...) finds every post there. Exchanged
 * in a call of their own after each call (thread-group/clock-meetings.ts),
 * the clocks take a round trip between the members that doubles a job's
 * small calls.
 *
 * Each member owns DEPTH slots, taken in turn by its collectives' indexes: a
 * slot's stamp says which index its values are for (index + 1; zero-filled is
 * empty). A member reuses a slot only once every member has read it: each
 * counts the indexes it has met, in order.
 */
import type { SharedRegion } from '../runtime/tensor-store.ts';
import { deadlineAfter, waitForWord, wake } from '../runtime/wait.ts';
import type { ClockMeeting, MetClocks } from './clock-meeting.ts';

/** Collectives a member may post ahead of the slowest reader before its next post waits. */
const DEPTH = 64;
const VALUES_PER_SLOT = 2;

export interface ClockBoardGroup {
  name: string;
  /** Members' global ranks, in group-rank order. */
  ranks: readonly number[];
  /** This rank's group rank. */
  rank: number;
  timeoutMs: number;
}

/** Bytes of the shared region a board for `size` members takes. */
export function clockBoardBytes(size: number): number {
  return size * DEPTH * VALUES_PER_SLOT * Float64Array.BYTES_PER_ELEMENT + (size * (DEPTH + 1) + 1) * 4;
}

export class ClockBoard implements ClockMeeting {
  readonly #region: SharedRegion;
  readonly #group: ClockBoardGroup;
  /** [clock, bytes] of each member's slots. */
  readonly #values: Float64Array;
  /** Each member's slot stamps, then each member's count of indexes met, then the sleepers of both. */
  readonly #words: Int32Array;
  readonly #metAt: number;
  readonly #sleepers: number;
  /** Posts waiting for a slot to be read, by index; each goes after the one before. */
  readonly #pending = new Map<number, Promise<void>>();
  #lastPending: Promise<void> = Promise.resolve();

  constructor(region: SharedRegion, group: ClockBoardGroup) {
    const size = group.ranks.length;
    if (region.byteLength < clockBoardBytes(size))
      throw new RangeError(`a clock board for ${size} ranks needs ${clockBoardBytes(size)} bytes`);
    this.#region = region;
    this.#group = group;
    const valueCount = size * DEPTH * VALUES_PER_SLOT;
    this.#values = new Float64Array(region.buffer as unknown as ArrayBuffer, region.byteOffset, valueCount);
    this.#words = new Int32Array(
      region.buffer as unknown as ArrayBuffer,
      region.byteOffset + valueCount * Float64Array.BYTES_PER_ELEMENT,
      size * (DEPTH + 1) + 1,
    );
    this.#metAt = size * DEPTH;
    this.#sleepers = size * (DEPTH + 1);
  }

  post(index: number, clockUs: number, bytes: number): void {
    if (this.#pending.size === 0 && this.#slotFree(index)) {
      this.#write(index, clockUs, bytes);
      return;
    }
    const posted = this.#lastPending.then(async () => {
      await this.#untilSlotFree(index);
      this.#write(index, clockUs, bytes);
    });
    this.#pending.set(index, posted);
    this.#lastPending = posted;
    // A failed post stays, for this member's meet of `index` to throw its error.
    posted.then(
      () => this.#pending.delete(index),
      () => undefined,
    );
  }

  async meet(index: number): Promise<MetClocks> {
    await this.#pending.get(index);
    const { ranks, timeoutMs } = this.#group;
    // Read off the clock only where a post is not there yet, which a collective seldom finds.
    let deadline: number | undefined;
    let latestUs = Number.NEGATIVE_INFINITY;
    let bytes = 0;
    for (let member = 0; member < ranks.length; member++) {
      const stamp = this.#slot(member, index);
      if (Atomics.load(this.#words, stamp) !== index + 1)
        await waitForWord(this.#words, stamp, (value) => value === index + 1, {
          deadline: (deadline ??= deadlineAfter(timeoutMs)),
          abort: this.#region.abort,
          sleepers: this.#sleepers,
          describe: () => this.#notPosted(member, index),
        });
      latestUs = Math.max(latestUs, this.#values[stamp * VALUES_PER_SLOT]);
      bytes = Math.max(bytes, this.#values[stamp * VALUES_PER_SLOT + 1]);
    }
    const met = this.#metAt + this.#group.rank;
    Atomics.store(this.#words, met, index + 1);
    wake(this.#words, met, this.#sleepers);
    return { latestUs, bytes };
  }

  #slot(member: number, index: number): number {
    return member * DEPTH + (index % DEPTH);
  }

  /** Whether every member has met the index that last took `index`'s slot. */
  #slotFree(index: number): boolean {
    const needed = index - DEPTH + 1;
    for (let member = 0; member < this.#group.ranks.length; member++)
      if (Atomics.load(this.#words, this.#metAt + member) < needed) return false;
    return true;
  }

  async #untilSlotFree(index: number): Promise<void> {
    const needed = index - DEPTH + 1;
    const deadline = deadlineAfter(this.#group.timeoutMs);
    for (let member = 0; member < this.#group.ranks.length; member++)
      await waitForWord(this.#words, this.#metAt + member, (value) => value >= needed, {
        deadline,
        abort: this.#region.abort,
        sleepers: this.#sleepers,
        describe: () =>
          `predict mode: group ${this.#group.name}: rank ${this.#group.ranks[this.#group.rank]} waited ` +
          `${this.#group.timeoutMs} ms for rank ${this.#group.ranks[member]} to end collective ${needed - 1}, ` +
          `${DEPTH} collectives behind it`,
      });
  }

  #write(index: number, clockUs: number, bytes: number): void {
    const stamp = this.#slot(this.#group.rank, index);
    this.#values[stamp * VALUES_PER_SLOT] = clockUs;
    this.#values[stamp * VALUES_PER_SLOT + 1] = bytes;
    // Stored after the values: a reader that sees the stamp sees them.
    Atomics.store(this.#words, stamp, index + 1);
    wake(this.#words, stamp, this.#sleepers);
  }

  #notPosted(member: number, index: number): string {
    const { name, ranks, rank, timeoutMs } = this.#group;
    return (
      `predict mode: group ${name}: rank ${ranks[rank]} ended its collective ${index} and waited ` +
      `${timeoutMs} ms for rank ${ranks[member]}'s clock, which has not issued that collective`
    );
  }
}
