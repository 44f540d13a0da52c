/**
 * The clock board thread ranks meet on in predict mode (src/predict/clock-board.ts):
 * members' boards over one shared region, driven from one thread, as rank
 * threads would drive them.
 */
import { describe, expect, it } from 'vitest';
import { ClockBoard, clockBoardBytes } from '../../src/predict/clock-board.ts';
import { AbortWord } from '../../src/runtime/abort-word.ts';
import { CommTimeoutError, RankFailedError } from '../../src/runtime/errors.ts';

/** The boards of a group of `size` whose global ranks are 10, 11, ...: one per member, over one region. */
function boards(size: number, timeoutMs = 5_000, abort?: AbortWord) {
  const bytes = clockBoardBytes(size);
  const region = { buffer: new SharedArrayBuffer(bytes + 64), byteOffset: 64, byteLength: bytes, abort };
  const ranks = Array.from({ length: size }, (_, r) => 10 + r);
  return ranks.map((_, rank) => new ClockBoard(region, { name: 'tp', ranks, rank, timeoutMs }));
}

/** Whether `promise` has settled after the event loop ran a little. */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setTimeout(resolve, 20));
  return settled;
}

describe('ClockBoard', () => {
  it("gives every member the latest clock and the largest bytes of each collective's posts", async () => {
    const [a, b, c] = boards(3);
    a.post(0, 100, 8);
    b.post(0, 250, 8);
    c.post(0, 40, 4096);
    a.post(1, 300, 16);
    b.post(1, 260, 16);
    c.post(1, 310, 16);
    for (const board of [a, b, c]) {
      expect(await board.meet(0)).toEqual({ latestUs: 250, bytes: 4096 });
      expect(await board.meet(1)).toEqual({ latestUs: 310, bytes: 16 });
    }
  });

  it('a member that ended a collective before a peer issued it waits for its post', async () => {
    const [root, early, late] = boards(3);
    root.post(0, 10, 64);
    early.post(0, 20, 64);
    const met = early.meet(0);
    expect(await settledSoon(met)).toBe(false);
    late.post(0, 500, 64);
    expect(await met).toEqual({ latestUs: 500, bytes: 64 });
  });

  it('reuses a slot only once every member met the collective that held it, 64 collectives on', async () => {
    const [a, b] = boards(2);
    for (let i = 0; i < 64; i++) {
      a.post(i, i, 1);
      b.post(i, i, 1);
    }
    // b has not met collective 0: a's post of 64 (and of 65 after it) waits, and so does a's meet of them.
    a.post(64, 1_000, 2);
    a.post(65, 2_000, 3);
    for (let i = 0; i < 64; i++) expect(await a.meet(i)).toEqual({ latestUs: i, bytes: 1 });
    const aheadMet = a.meet(64);
    expect(await settledSoon(aheadMet)).toBe(false);
    expect(await b.meet(0)).toEqual({ latestUs: 0, bytes: 1 });
    b.post(64, 5, 2);
    expect(await aheadMet).toEqual({ latestUs: 1_000, bytes: 2 });
    for (let i = 1; i < 64; i++) await b.meet(i);
    b.post(65, 6, 3);
    expect(await a.meet(65)).toEqual({ latestUs: 2_000, bytes: 3 });
    expect(await b.meet(65)).toEqual({ latestUs: 2_000, bytes: 3 });
  });

  it('a wait for a post that never comes times out naming who waits for whom', async () => {
    const [a] = boards(2, 100);
    a.post(0, 1, 1);
    const error = await a.meet(0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommTimeoutError);
    expect((error as Error).message).toMatch(
      /group tp: rank 10 ended its collective 0 and waited 100 ms for rank 11's clock, which has not issued that collective/,
    );
  });

  it("a post that waits for a slow reader fails with the job's abort, and the member's meet says so", async () => {
    const abort = new AbortWord();
    const [a, b] = boards(2, 5_000, abort);
    for (let i = 0; i <= 64; i++) a.post(i, i, 1);
    for (let i = 0; i < 64; i++) {
      b.post(i, i, 1);
      await a.meet(i);
    }
    const met = a.meet(64);
    abort.abort(11, 'rank 11 failed: out of memory');
    const error = await met.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RankFailedError);
    expect((error as Error).message).toMatch(/out of memory/);
  });
});
