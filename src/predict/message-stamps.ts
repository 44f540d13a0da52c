/**
 * MessageStamps: where a sender leaves a point-to-point message's stamp in
 * predict mode (its start, bytes, arrival, and whether an emulated link gave
 * the arrival: predicted-calls.ts) for the receiver to read once the message
 * arrived, without a message of its own: on a board of memory the group's
 * members map (board-memory.ts). Sent as a message of its own on the group's
 * twin, a stamp made every small receive wait for a second message, a
 * handshake in the keyed store: a small message's round trip took several
 * times its plain one.
 *
 * The sender writes the stamp before it sends the message, so the message's
 * arrival finds it there. Each member owns DEPTH slots, written in turn; a
 * slot names its receiver, tag and the message's number in that stream
 * (sender → receiver, tag), and its word counts its generation: odd while it
 * holds a stamp, even once its receiver took it. Where the slot whose turn
 * it is still holds a stamp nobody received yet (a sender DEPTH messages
 * ahead of its receivers), `write` says no, and the stamp goes on the twin:
 * a receiver that finds no slot for its message, which has arrived, knows
 * its stamp went there.
 */
import { type BoardMemory, BoardParts, type PartViews, partBytes } from './board-memory.ts';

/** Stamps a member may leave before its next write finds its slot still taken. */
const DEPTH = 64;
/** A slot's values: receiver, tag, message number, then the stamp's. */
const RECEIVER = 0;
const TAG = 1;
const NUMBER = 2;
const STAMP = 3;
export const STAMP_VALUES = 4;
const VALUES_PER_SLOT = STAMP + STAMP_VALUES;

/** Bytes of one member's slots: their values, then each slot's generation (odd while it holds a stamp). */
export const STAMP_SLOTS_BYTES = partBytes(DEPTH * VALUES_PER_SLOT, DEPTH);

/** Which message a stamp is for: its stream (sender → receiver, tag), and its number in the stream. */
export interface StampedMessage {
  /** Group ranks. */
  sender: number;
  receiver: number;
  tag: number;
  number: number;
}

export class MessageStamps {
  readonly #parts: BoardParts;
  readonly #rank: number;
  /** This member's next slot to write. */
  #next = 0;
  /** Per sender, the slot after the last this member took from it: where its next stamp most likely is. */
  readonly #after: number[];

  /** `rank`: this member's group rank; `size`: the group's. */
  constructor(memory: BoardMemory, rank: number, size: number) {
    this.#parts = new BoardParts(memory, size, DEPTH * VALUES_PER_SLOT, DEPTH);
    this.#rank = rank;
    this.#after = Array.from({ length: size }, () => 0);
  }

  /** Leaves the stamp of this member's message; false where its slot is still taken (the stamp goes another way). */
  write(message: StampedMessage, stamp: readonly number[]): boolean {
    const { values, words } = this.#parts.of(this.#rank) as PartViews;
    const slot = this.#next;
    const generation = Atomics.load(words, slot);
    if (generation % 2 !== 0) return false;
    const at = slot * VALUES_PER_SLOT;
    values[at + RECEIVER] = message.receiver;
    values[at + TAG] = message.tag;
    values[at + NUMBER] = message.number;
    for (let i = 0; i < STAMP_VALUES; i++) values[at + STAMP + i] = stamp[i];
    // Stored after the values: a reader that sees the new generation sees them.
    Atomics.store(words, slot, generation + 1);
    this.#next = (slot + 1) % DEPTH;
    return true;
  }

  /**
   * The stamp of `message`, to this member, taken off the board (its slot
   * free again); undefined where it is not there. Called once the message
   * arrived, when a stamp left on the board is there.
   */
  take(message: StampedMessage): Float64Array | undefined {
    const { sender } = message;
    const slots = this.#parts.of(sender);
    if (slots === undefined) return undefined;
    const { values, words } = slots;
    for (let i = 0; i < DEPTH; i++) {
      const slot = (this.#after[sender] + i) % DEPTH;
      const generation = Atomics.load(words, slot);
      if (generation % 2 === 0) continue;
      const at = slot * VALUES_PER_SLOT;
      if (
        values[at + RECEIVER] !== this.#rank ||
        values[at + TAG] !== message.tag ||
        values[at + NUMBER] !== message.number
      )
        continue;
      const stamp = values.slice(at + STAMP, at + STAMP + STAMP_VALUES);
      // Read while the slot held this stamp: a slot of another receiver, taken and written again
      // meanwhile, changed generation and is not this message's.
      if (Atomics.load(words, slot) !== generation) continue;
      Atomics.store(words, slot, generation + 1);
      this.#after[sender] = (slot + 1) % DEPTH;
      return stamp;
    }
    return undefined;
  }
}
