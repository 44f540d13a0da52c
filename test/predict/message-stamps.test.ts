/**
 * The board where a sender leaves its point-to-point messages' stamps in
 * predict mode (src/predict/message-stamps.ts), over both of its memories;
 * members are driven from one thread, as their ranks would drive them.
 */
import { describe, expect, it } from 'vitest';
import { MessageStamps, STAMP_SLOTS_BYTES } from '../../src/predict/message-stamps.ts';
import { boardMemories } from '../fixtures/board-memories.ts';
import { storeJobs } from '../fixtures/store-jobs.ts';

const kinds = boardMemories(storeJobs('message-stamps'), STAMP_SLOTS_BYTES);
/** Slots a member owns (message-stamps.ts' DEPTH). */
const DEPTH = 64;

describe.each(Object.keys(kinds))('MessageStamps over %s', (kind) => {
  /** One board per member of a group of `size`. */
  function members(size: number) {
    const { of } = kinds[kind](Array.from({ length: size }, (_, r) => 10 + r));
    return Array.from({ length: size }, (_, rank) => new MessageStamps(of(rank), rank, size));
  }
  const message = (sender: number, receiver: number, tag: number, number: number) => ({
    sender,
    receiver,
    tag,
    number,
  });
  const taken = (stamp: Float64Array | undefined) => stamp && [...stamp];

  it('a receiver takes the stamp of its own message: by receiver, tag and number, once', () => {
    const [a, b, c] = members(3);
    expect(a.write(message(0, 1, 5, 0), [10, 4, 11, 0])).toBe(true);
    expect(a.write(message(0, 2, 5, 0), [20, 8, 21, 1])).toBe(true);
    expect(a.write(message(0, 1, 6, 0), [30, 16, 31, 0])).toBe(true);
    expect(a.write(message(0, 1, 5, 1), [40, 32, 41, 0])).toBe(true);
    expect(taken(b.take(message(0, 1, 6, 0)))).toEqual([30, 16, 31, 0]);
    expect(taken(b.take(message(0, 1, 5, 1)))).toEqual([40, 32, 41, 0]);
    expect(taken(c.take(message(0, 2, 5, 0)))).toEqual([20, 8, 21, 1]);
    expect(taken(b.take(message(0, 1, 5, 0)))).toEqual([10, 4, 11, 0]);
    // Each once: taken, its slot holds nothing for anyone.
    expect(b.take(message(0, 1, 5, 0))).toBeUndefined();
    // Not on the board: a stamp its sender sent another way, or a sender without slots of its own.
    expect(b.take(message(0, 1, 7, 0))).toBeUndefined();
    expect(b.take(message(2, 1, 5, 0))).toBeUndefined();
  });

  it('a sender DEPTH stamps ahead of its receiver is told no, and writes again once the slot is taken', () => {
    const [a, b] = members(2);
    for (let i = 0; i < DEPTH; i++) expect(a.write(message(0, 1, 0, i), [i, 1, i, 0])).toBe(true);
    expect(a.write(message(0, 1, 0, DEPTH), [DEPTH, 1, DEPTH, 0])).toBe(false);
    // Taking another slot than the one whose turn it is frees no turn.
    expect(taken(b.take(message(0, 1, 0, 1)))).toEqual([1, 1, 1, 0]);
    expect(a.write(message(0, 1, 0, DEPTH), [DEPTH, 1, DEPTH, 0])).toBe(false);
    expect(taken(b.take(message(0, 1, 0, 0)))).toEqual([0, 1, 0, 0]);
    expect(a.write(message(0, 1, 0, DEPTH), [-1, 2, -3, 1])).toBe(true);
    expect(taken(b.take(message(0, 1, 0, DEPTH)))).toEqual([-1, 2, -3, 1]);
    for (let i = 2; i < DEPTH; i++) expect(taken(b.take(message(0, 1, 0, i)))).toEqual([i, 1, i, 0]);
  });

  it('slots go round many times: every stamp reaches its receiver exact', () => {
    const [a, b, c] = members(3);
    for (let i = 0; i < 5 * DEPTH; i++) {
      const to = 1 + (i % 2);
      expect(a.write(message(0, to, i % 3, i), [i * 0.5, i, i + 0.25, i % 2])).toBe(true);
      const receiver = to === 1 ? b : c;
      expect(taken(receiver.take(message(0, to, i % 3, i)))).toEqual([i * 0.5, i, i + 0.25, i % 2]);
    }
  });
});
