/**
 * rankTest itself: bodies run on every rank in the file's own code, found by
 * name and occurrence whatever the file's layout, on threads kept warm from
 * test to test while each test gets a job of its own.
 */
import { threadId } from 'node:worker_threads';
import { describe, expect } from 'vitest';
import { dumpFlightRecorder, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';

rankTest('averages gradients', { worldSize: 4 }, async (ctx) => {
  const g = Tensor.full([3], ctx.rank);
  await ctx.world.allReduce(g, { op: 'avg' });
  expect(g.toArray()).toEqual([1.5, 1.5, 1.5]);
});

describe('the body vitest means runs, whatever the layout', () => {
  // A describe block's rank tests register after the file's top level, in vitest and in rank threads alike:
  // this one is the first "same name" of the file in both, the top-level one after the block the second.
  rankTest('same name', { worldSize: 2 }, async (ctx) => {
    expect(ctx.worldSize).toBe(2);
  });

  const sizes = [1, 3];
  for (const size of sizes) {
    rankTest(`a loop's test on ${size}`, { worldSize: size }, async (ctx) => {
      expect(ctx.worldSize).toBe(size);
    });
  }

  describe.each([2, 3])('describe.each with %i', (size) => {
    rankTest('sees its case', { worldSize: size }, async (ctx) => {
      expect(ctx.worldSize).toBe(size);
    });
  });
});

rankTest('same name', { worldSize: 3 }, async (ctx) => {
  expect(ctx.worldSize).toBe(3);
});

/** Per thread (module state lives on from test to test, as in vitest): the jobs this thread ran. */
const jobs: number[] = [];

describe('warm threads, fresh jobs', () => {
  rankTest('a first job leaves state behind', { worldSize: 4, config: { collective: {} } }, async (ctx) => {
    jobs.push(threadId);
    expect(ctx.config).toEqual({ collective: {} });
    await ctx.world.allReduce(Tensor.ones([2]));
    const pair = ctx.manager.getGroup([0, 1]);
    if (pair.isMember) await pair.barrier();
    await ctx.newGroup([0, 2]);
    // A value nobody reads: a store that outlived its job would still hold it.
    if (ctx.rank === 0) await ctx.store.srcSet('left-behind', Tensor.ones([1]), 1);
  });

  rankTest('the next job on the same threads starts from nothing', { worldSize: 4 }, async (ctx) => {
    jobs.push(threadId);
    // Every rank thread ran the job before too: nothing was started anew.
    expect(jobs).toEqual([threadId, threadId]);
    expect(ctx.config).toBeUndefined();
    expect(ctx.manager.keys()).toEqual([]);
    const t = Tensor.full([1], ctx.rank);
    await ctx.world.allReduce(t);
    expect(t.toArray()).toEqual([6]);
    // The world's numbering starts again: this is its call #0.
    expect(
      dumpFlightRecorder()
        .filter((e) => e.group === 'world')
        .map((e) => e.seq),
    ).toEqual([0]);
    if (ctx.rank === 1) {
      await expect(ctx.store.destGet('left-behind', { timeoutMs: 100 })).rejects.toThrow(
        /no rank has set this key/,
      );
    }
  });
});

describe('ranks as tasks of one thread', () => {
  rankTest(
    'threads: 1 runs every rank in one thread of its own',
    { worldSize: 6, threads: 1 },
    async (ctx) => {
      const threads = await ctx.world.allGatherObject(threadId);
      expect(new Set(threads).size).toBe(1);
      // Not a warm thread of the file's: those ran the tests above.
      expect(jobs).not.toContain(threads[0]);
      const t = Tensor.full([2], ctx.rank);
      await ctx.world.allReduce(t);
      expect(t.toArray()).toEqual([15, 15]);
    },
  );

  rankTest('a thread per rank again after it', { worldSize: 3 }, async (ctx) => {
    const threads = await ctx.world.allGatherObject(threadId);
    expect(new Set(threads).size).toBe(3);
  });
});
