/**
 * ClockBoard: where the members of one group that share a machine's memory
 * meet in predict mode for a collective's start, without a call of their own
 * (on a board-memory.ts board). Each member posts its clock and its
 * bytes for the group's next collective as it issues it, and reads every
 * member's once the collective ended, by which time the members that took
 * part in it have posted: a collective in which every member hears from every
 * other (allReduce, allGather, barrier, ...) finds every post there.
 * Exchanged in a call of their own after each call
 * (thread-group/clock-meetings.ts), the clocks take a round trip between the
 * members that doubles a job's small calls.
 *
 * Each member owns DEPTH slots, taken in turn by its collectives' indexes: a
 * slot's stamp says which index its values are for (index + 1; zero-filled is
 * empty). A member reuses a slot only once every member has read it: each
 * counts the indexes it has met, in order. A wait on another process's
 * memory looks now and then (runtime/wait.ts): no notify crosses processes.
 */
import { deadlineAfter, pollUntil, waitForWord, wake } from '../runtime/wait.ts';
import { type BoardMemory, BoardParts, type PartViews, partBytes } from './board-memory.ts';
import type { ClockMeeting, MetClocks } from './clock-meeting.ts';

/** Collectives a member may post ahead of the slowest reader before its next post waits. */
const DEPTH = 64;
const VALUES_PER_SLOT = 2;
/** A member's words: its slots' stamps, then its count of indexes met, then the waits sleeping on either. */
const MET = DEPTH;
const SLEEPERS = DEPTH + 1;
const WORDS = DEPTH + 2;

/** Bytes of one member's slots. */
export const BOARD_SLOTS_BYTES = partBytes(DEPTH * VALUES_PER_SLOT, WORDS);

export interface ClockBoardGroup {
  name: string;
  /** Members' global ranks, in group-rank order. */
  ranks: readonly number[];
  /** This rank's group rank. */
  rank: number;
  timeoutMs: number;
}

export class ClockBoard implements ClockMeeting {
  /** Each member's slots: [clock, bytes] values, then its words. */
  readonly #parts: BoardParts;
  readonly #group: ClockBoardGroup;
  /** Posts waiting for a slot to be read, by index; each goes after the one before. */
  readonly #pending = new Map<number, Promise<void>>();
  #lastPending: Promise<void> = Promise.resolve();

  constructor(memory: BoardMemory, group: ClockBoardGroup) {
    this.#parts = new BoardParts(memory, group.ranks.length, DEPTH * VALUES_PER_SLOT, WORDS);
    this.#group = group;
  }

  /** Resolves once word `word` of member `member`'s slots holds a value `ready` accepts. */
  async #until(
    member: number,
    word: number,
    ready: (value: number) => boolean,
    deadline: number,
    describe: () => string,
  ): Promise<PartViews> {
    const options = { deadline, abort: this.#parts.abort, describe };
    const slots = this.#parts.of(member) ?? (await pollUntil(() => this.#parts.of(member), options));
    await waitForWord(slots.words, word, ready, { ...options, sleepers: SLEEPERS });
    return slots;
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
    // Waits, and reads the clock, only where a post is not there yet, which a collective seldom finds.
    let deadline: number | undefined;
    for (let member = 0; member < this.#group.ranks.length; member++) {
      if (this.#posted(member, index) === undefined)
        await this.#until(
          member,
          index % DEPTH,
          (value) => value === index + 1,
          (deadline ??= deadlineAfter(this.#group.timeoutMs)),
          () => this.#notPosted(member, index),
        );
    }
    return this.#met(index);
  }

  metNow(index: number): MetClocks | undefined {
    if (this.#pending.has(index)) return undefined;
    for (let member = 0; member < this.#group.ranks.length; member++)
      if (this.#posted(member, index) === undefined) return undefined;
    return this.#met(index);
  }

  /** Member `member`'s slots, where they hold its post of `index`. */
  #posted(member: number, index: number): PartViews | undefined {
    const slots = this.#parts.of(member);
    return slots && Atomics.load(slots.words, index % DEPTH) === index + 1 ? slots : undefined;
  }

  /** Every member's post of `index` (all there), read: this member has met it. */
  #met(index: number): MetClocks {
    const at = (index % DEPTH) * VALUES_PER_SLOT;
    let latestUs = Number.NEGATIVE_INFINITY;
    let bytes = 0;
    for (let member = 0; member < this.#group.ranks.length; member++) {
      const { values } = this.#parts.of(member) as PartViews;
      latestUs = Math.max(latestUs, values[at]);
      bytes = Math.max(bytes, values[at + 1]);
    }
    const mine = this.#parts.of(this.#group.rank) as PartViews;
    Atomics.store(mine.words, MET, index + 1);
    wake(mine.words, MET, SLEEPERS);
    return { latestUs, bytes };
  }

  /** Whether every member has met the index that last took `index`'s slot. */
  #slotFree(index: number): boolean {
    const needed = index - DEPTH + 1;
    if (needed <= 0) return true;
    for (let member = 0; member < this.#group.ranks.length; member++) {
      const slots = this.#parts.of(member);
      if (slots === undefined || Atomics.load(slots.words, MET) < needed) return false;
    }
    return true;
  }

  async #untilSlotFree(index: number): Promise<void> {
    const needed = index - DEPTH + 1;
    const deadline = deadlineAfter(this.#group.timeoutMs);
    for (let member = 0; member < this.#group.ranks.length; member++)
      await this.#until(
        member,
        MET,
        (value) => value >= needed,
        deadline,
        () =>
          `predict mode: group ${this.#group.name}: rank ${this.#group.ranks[this.#group.rank]} waited ` +
          `${this.#group.timeoutMs} ms for rank ${this.#group.ranks[member]} to end collective ${needed - 1}, ` +
          `${DEPTH} collectives behind it`,
      );
  }

  #write(index: number, clockUs: number, bytes: number): void {
    const { values, words } = this.#parts.of(this.#group.rank) as PartViews;
    const slot = index % DEPTH;
    values[slot * VALUES_PER_SLOT] = clockUs;
    values[slot * VALUES_PER_SLOT + 1] = bytes;
    // Stored after the values: a reader that sees the stamp sees them.
    Atomics.store(words, slot, index + 1);
    wake(words, slot, SLEEPERS);
  }

  #notPosted(member: number, index: number): string {
    const { name, ranks, rank, timeoutMs } = this.#group;
    return (
      `predict mode: group ${name}: rank ${ranks[rank]} ended its collective ${index} and waited ` +
      `${timeoutMs} ms for rank ${ranks[member]}'s clock, which has not issued that collective`
    );
  }
}
