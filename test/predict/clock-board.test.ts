/**
 * The clock board ranks meet on in predict mode (src/predict/clock-board.ts),
 * over both of its memories: one shared region (thread ranks) and a file per
 * member that the others map (process ranks of one node: FileTensorStore's
 * node regions). Members' boards are driven from one thread, as their ranks
 * would drive them.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileTensorStore } from '../../src/file-store/index.ts';
import { type BoardMemory, nodeFilesBoard } from '../../src/predict/board-memory.ts';
import { BOARD_SLOTS_BYTES, ClockBoard } from '../../src/predict/clock-board.ts';
import { CommTimeoutError, RankFailedError } from '../../src/runtime/errors.ts';
import { boardMemories, type Memories } from '../fixtures/board-memories.ts';
import { storeJobs } from '../fixtures/store-jobs.ts';

const jobs = storeJobs('clock-board');
const { newJob, opened } = jobs;

const kinds = boardMemories(jobs, BOARD_SLOTS_BYTES);

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

describe.each(Object.keys(kinds))('ClockBoard over %s', (kind) => {
  let memories: Memories;
  /** The boards of a group of `size` whose global ranks are 10, 11, ...: one per member. */
  function boards(size: number, timeoutMs = 5_000) {
    const ranks = Array.from({ length: size }, (_, r) => 10 + r);
    memories = kinds[kind](ranks);
    const { of } = memories;
    return ranks.map((_, rank) => new ClockBoard(of(rank), { name: 'tp', ranks, rank, timeoutMs }));
  }

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

  it('meets at once where every post is there, and does nothing where one is not', async () => {
    const [a, b] = boards(2);
    a.post(0, 100, 8);
    expect(a.metNow(0)).toBeUndefined();
    b.post(0, 300, 16);
    expect(a.metNow(0)).toEqual({ latestUs: 300, bytes: 16 });
    expect(b.metNow(0)).toEqual({ latestUs: 300, bytes: 16 });
    // Met at once, the slots free as a meet's would: 64 collectives on, posts go in at once again.
    for (let i = 1; i <= 64; i++) {
      a.post(i, i, 1);
      b.post(i, i, 1);
      expect(a.metNow(i)).toEqual({ latestUs: i, bytes: 1 });
      expect(b.metNow(i)).toEqual({ latestUs: i, bytes: 1 });
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
    const [a, b] = boards(2);
    for (let i = 0; i <= 64; i++) a.post(i, i, 1);
    for (let i = 0; i < 64; i++) {
      b.post(i, i, 1);
      await a.meet(i);
    }
    const met = a.meet(64);
    memories.fail(11, 'rank 11 failed: out of memory');
    const error = await met.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RankFailedError);
    expect((error as Error).message).toMatch(/out of memory/);
  });
});

describe('ClockBoard over a file per member', () => {
  it("waits for a peer whose file is not made yet, and its owner's close removes it", async () => {
    const dir = newJob();
    const [early, late] = [10, 11].map((rank) => new FileTensorStore({ dir, rank, pollMs: 10 }));
    opened.push(early, late);
    const ranks = [10, 11];
    const group = { name: 'tp', ranks, timeoutMs: 5_000 };
    const a = new ClockBoard(nodeFilesBoard(early, 'k:board', ranks, 0, BOARD_SLOTS_BYTES) as BoardMemory, {
      ...group,
      rank: 0,
    });
    a.post(0, 7, 32);
    const met = a.meet(0);
    expect(await settledSoon(met)).toBe(false);
    const b = new ClockBoard(nodeFilesBoard(late, 'k:board', ranks, 1, BOARD_SLOTS_BYTES) as BoardMemory, {
      ...group,
      rank: 1,
    });
    b.post(0, 90, 32);
    expect(await met).toEqual({ latestUs: 90, bytes: 32 });
    expect(await b.meet(0)).toEqual({ latestUs: 90, bytes: 32 });
    const regions = () => readdirSync(join(dir, 'tmp')).filter((name) => name.startsWith('region.'));
    expect(regions()).toHaveLength(2);
    early.close();
    late.close();
    expect(regions()).toEqual([]);
  });
});
