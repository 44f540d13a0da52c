/**
 * Small allReduces between real rank threads, which meet in their group's shared region
 * (src/thread-group/store-backend/call-region.ts), and sizes just past it, which the keyed store
 * serves: results, order of un-awaited calls, mismatches across the cutoff, a rank lost mid-call,
 * a timeout; a barrier against a late rank, against an allReduce, and against one the keyed store serves. test/call-region.test.ts covers every dtype and op and 64 ranks in one thread.
 */
import { expect } from 'vitest';
import { CommTimeoutError, RankFailedError, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { CallMismatchError } from '../src/thread-group/backend.ts';
import { regionMaxBytes } from '../src/thread-group/store-backend/call-region.ts';
import { failure } from './fixtures/failure.ts';

/** float32 elements at the cutoff of a group of `size`. */
const atCutoff = (size: number) => regionMaxBytes(size, false) / 4;

// Largest first: later tests reuse its warm rank threads.
for (const worldSize of [8, 4, 3, 2, 1]) {
  rankTest(
    `allReduce sums and averages on ${worldSize} thread ranks, on both sides of the cutoff`,
    { worldSize },
    async (ctx) => {
      const n = worldSize;
      const rankSum = (n * (n - 1)) / 2;
      for (const numel of [1, atCutoff(n), atCutoff(n) + 1]) {
        const t = Tensor.full([numel], ctx.rank, 'int32');
        await ctx.world.allReduce(t);
        expect(t.data.every((v) => v === rankSum)).toBe(true);
        const f = Tensor.full([numel], ctx.rank + 1, 'float64');
        await ctx.world.allReduce(f, { op: 'avg' });
        expect(f.data.every((v) => v === (n + 1) / 2)).toBe(true);
        const p = Tensor.full([numel], 2, 'float32');
        await ctx.world.allReduce(p, { op: 'premulSum', factor: 0.5 });
        expect(p.data.every((v) => v === n)).toBe(true);
      }
    },
  );
}

rankTest(
  "the last rank to arrive at a small allReduce completes it as it returns; the others' Works settle after",
  { worldSize: 2 },
  async (ctx) => {
    await ctx.world.barrier();
    const t = Tensor.full([2], ctx.rank + 1, 'int32');
    // Rank 0 arrives late, long after rank 1 started waiting.
    if (ctx.rank === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    const work = ctx.world.allReduce(t);
    if (ctx.rank === 0) {
      expect(work.done()).toBe(true);
      expect(t.toArray()).toEqual([3, 3]);
    }
    expect(await work).toBe(t);
    expect(t.toArray()).toEqual([3, 3]);
  },
);

rankTest(
  'many un-awaited calls on two groups, small and large mixed, complete in order',
  { worldSize: 4 },
  async (ctx) => {
    const pair = await ctx.newGroup(ctx.rank < 2 ? [0, 1] : [2, 3]);
    const calls = 40;
    const sizes = (c: number) => (c % 5 === 4 ? atCutoff(ctx.world.size) + 1 : 8);
    const world = Array.from({ length: calls }, (_, c) =>
      Tensor.full([sizes(c)], c * 10 + ctx.rank, 'float32'),
    );
    const pairs = Array.from({ length: calls }, (_, c) => Tensor.full([8], c + ctx.rank, 'int32'));
    const works = [];
    for (let c = 0; c < calls; c++) works.push(ctx.world.allReduce(world[c]), pair.allReduce(pairs[c]));
    await Promise.all(works);
    const pairRanks = ctx.rank < 2 ? 0 + 1 : 2 + 3;
    for (let c = 0; c < calls; c++) {
      expect(world[c].data[0]).toBe(40 * c + 6);
      expect(world[c].data.every((v) => v === world[c].data[0])).toBe(true);
      expect(pairs[c].toArray()).toEqual(new Array(8).fill(2 * c + pairRanks));
    }
  },
);

rankTest(
  'a barrier holds every rank until the last arrives, and a rank that calls something else fails them all with a mismatch',
  { worldSize: 4 },
  async (ctx) => {
    const now = () => performance.timeOrigin + performance.now();
    for (let round = 0; round < 3; round++) {
      // The last rank comes late; nobody may leave the barrier before it came.
      if (ctx.rank === 3) await new Promise((resolve) => setTimeout(resolve, 50));
      const entered = now();
      await ctx.world.barrier();
      const left = now();
      const times = (await ctx.world.allGatherObject({ entered, left })) as {
        entered: number;
        left: number;
      }[];
      const lastEntry = Math.max(...times.map((t) => t.entered));
      for (const t of times) expect(t.left).toBeGreaterThanOrEqual(lastEntry);
    }
    const call = ctx.rank === 1 ? ctx.world.allReduce(Tensor.ones([2])) : ctx.world.barrier();
    const error = await failure(call);
    expect(error).toBeInstanceOf(CallMismatchError);
    expect(error.message).toMatch(
      ctx.rank === 1 ? /rank 0 called barrier\(\)/ : /rank 1 called allReduce\(float32\[2\], sum\)/,
    );
    await ctx.world.barrier();
  },
);

rankTest(
  'a barrier against an allReduce the keyed store serves fails every rank with a mismatch, quickly, then the group goes on',
  { worldSize: 3 },
  async (ctx) => {
    const started = performance.now();
    const large = () =>
      ctx.world.allReduce(Tensor.ones([atCutoff(ctx.world.size) + 1]), { timeoutMs: 20_000 });
    const call = ctx.rank === 2 ? ctx.world.barrier({ timeoutMs: 20_000 }) : large();
    const error = await failure(call);
    expect(error).toBeInstanceOf(CallMismatchError);
    expect(error.message).toMatch(
      ctx.rank === 2 ? /rank \d called allReduce\(float32\[\d+\], sum\)/ : /rank 2 called barrier\(\)/,
    );
    // Told through the keyed store, not at the timeout.
    expect(performance.now() - started).toBeLessThan(10_000);
    await ctx.world.barrier();
  },
);

rankTest(
  'a rank that calls a size past the cutoff fails every rank with a mismatch naming both, then the group goes on',
  { worldSize: 3 },
  async (ctx) => {
    const cutoff = atCutoff(ctx.world.size);
    const numel = ctx.rank === 2 ? cutoff + 1 : cutoff;
    const error = await failure(ctx.world.allReduce(Tensor.ones([numel])));
    expect(error).toBeInstanceOf(CallMismatchError);
    const other = ctx.rank === 2 ? 0 : 2;
    expect(error.message).toContain(`rank ${ctx.rank} called allReduce(float32[${numel}], sum) as call #0`);
    expect(error.message).toContain(
      `rank ${other} called allReduce(float32[${other === 2 ? cutoff + 1 : cutoff}], sum)`,
    );
    const t = Tensor.full([2], ctx.rank);
    await ctx.world.allReduce(t);
    expect(t.toArray()).toEqual([3, 3]);
  },
);

rankTest(
  'a rank whose call throws fails its peers in the region with its error',
  { worldSize: 3, faults: [{ rank: 1, op: 'allReduce', nth: 1, kind: 'throw' }] },
  async (ctx) => {
    await ctx.world.allReduce(Tensor.ones([4]));
    const error = await failure(ctx.world.allReduce(Tensor.ones([4])));
    if (ctx.rank !== 1)
      expect(error.message).toMatch(/group rank 1 failed this call: .*injected by faults\[0\]/);
    const t = Tensor.full([2], ctx.rank);
    await ctx.world.allReduce(t);
    expect(t.toArray()).toEqual([3, 3]);
  },
);

rankTest(
  'a rank lost mid-call fails the ranks waiting in the region long before their timeout',
  { worldSize: 3, collectiveTimeoutMs: 20_000, faults: [{ rank: 1, op: 'allReduce', nth: 1, kind: 'exit' }] },
  async (ctx) => {
    await ctx.world.allReduce(Tensor.ones([4]));
    const started = performance.now();
    const error = await failure(ctx.world.allReduce(Tensor.ones([4])));
    expect(error).toBeInstanceOf(RankFailedError);
    expect(error.message).toMatch(/rank 1 \(rank-1\)/);
    // A second in the design; the bound leaves a loaded machine room and still rules out the 20 s timeout.
    expect(performance.now() - started).toBeLessThan(5_000);
  },
);

rankTest(
  'a rank that comes late: the others time out naming it, and it fails with their error',
  { worldSize: 3, collectiveTimeoutMs: 400 },
  async (ctx) => {
    if (ctx.rank === 1) await new Promise((resolve) => setTimeout(resolve, 1_500));
    const error = await failure(ctx.world.allReduce(Tensor.ones([4])));
    if (ctx.rank === 1) {
      expect(error.message).toMatch(/group rank [02] failed this call: .*timed out after 400 ms/);
    } else {
      expect(error).toBeInstanceOf(CommTimeoutError);
      expect(error.message).toMatch(
        new RegExp(
          `allReduce\\(float32\\[4\\], sum\\) call #0 on group "world": rank ${ctx.rank} timed out after 400 ms waiting for group rank 1 \\(global rank 1\\)`,
        ),
      );
    }
  },
);
