import { describe, expect, it } from 'vitest';
import {
  CommTimeoutError,
  InjectedFaultError,
  JobFailedError,
  RankFailedError,
  spawnThreads,
  Tensor,
} from '../src/index.ts';
import { AbortWord } from '../src/runtime/abort-word.ts';
import { FaultInjector } from '../src/runtime/faults/injector.ts';
import { rankTest } from '../src/testing/index.ts';
import { failure } from './fixtures/failure.ts';

describe('throw', () => {
  rankTest(
    'the call rejects with InjectedFaultError; its peers fail naming the rank',
    {
      worldSize: 3,
      faults: [{ rank: 1, kind: 'throw' }],
    },
    async (ctx) => {
      const error = await failure(ctx.world.allReduce(Tensor.ones([4])));
      if (ctx.rank === 1) {
        expect(error).toBeInstanceOf(InjectedFaultError);
        expect(error.message).toMatch(
          /allReduce on group "world": injected by faults\[0\] \(rank 1, nth 0 of its communication calls, throw\)/,
        );
      } else {
        expect(error.message).toMatch(
          /rank 1 failed this call: .*InjectedFaultError|injected by faults\[0\]/,
        );
      }
      // The call took its number on every rank: the group goes on.
      const t = Tensor.full([2], ctx.rank);
      await ctx.world.allReduce(t);
      expect(t.toArray()).toEqual([3, 3]);
    },
  );

  rankTest(
    'op and nth pick the call: the second send, not the first nor the recv',
    {
      worldSize: 2,
      faults: [{ rank: 0, op: 'send', nth: 1, kind: 'throw' }],
    },
    async (ctx) => {
      const g = ctx.world;
      if (ctx.rank === 0) {
        await g.send(Tensor.full([2], 1), 1);
        expect(await failure(g.send(Tensor.full([2], 2), 1))).toBeInstanceOf(InjectedFaultError);
        await g.send(Tensor.full([2], 3), 1);
      } else {
        const got = Tensor.zeros([2]);
        await g.recv(got, 0);
        expect(got.toArray()).toEqual([1, 1]);
        expect((await failure(g.recv(got, 0))).message).toMatch(/InjectedFaultError|injected by faults\[0\]/);
        await g.recv(got, 0);
        expect(got.toArray()).toEqual([3, 3]);
      }
    },
  );
});

describe('exit', () => {
  rankTest(
    'the rank dies; every other rank fails naming it, and the test passes',
    {
      worldSize: 3,
      faults: [{ rank: 2, op: 'barrier', kind: 'exit' }],
    },
    async (ctx) => {
      await ctx.world.allReduce(Tensor.ones([2]));
      const error = await failure(ctx.world.barrier());
      expect(error).toBeInstanceOf(RankFailedError);
      expect(error.message).toMatch(
        /rank 2 \(rank-2\) exited with code \d+ before returning \(an injected fault\)/,
      );
    },
  );

  rankTest('the next test gets a fresh thread for the lost rank', { worldSize: 3 }, async (ctx) => {
    const t = Tensor.full([1], ctx.rank);
    await ctx.world.allReduce(t);
    expect(t.toArray()).toEqual([3]);
  });
});

describe('hang', () => {
  rankTest(
    'the call never completes; its peers time out with a report naming the hung call',
    {
      worldSize: 3,
      collectiveTimeoutMs: 800,
      faults: [{ rank: 1, op: 'allReduce', kind: 'hang' }],
    },
    async (ctx) => {
      await ctx.world.barrier();
      const error = await failure(ctx.world.allReduce(Tensor.ones([4])));
      // The hung rank gets here too, once the job ends it, and fails here: as a lost rank, that must not fail the test.
      expect(ctx.rank).not.toBe(1);
      expect(error).toBeInstanceOf(CommTimeoutError);
      // The hung call shows in the report as pending, with where the test made it.
      expect(error.message).toMatch(
        /rank 1: 1 call\(s\) pending[^\n]*\n\s+allReduce\(float32\[4\], sum\) #1 on group "world" for [^\n]*\(called at [^\n]*faults\.test\.ts:\d+/,
      );
    },
  );
});

describe('delay', () => {
  rankTest(
    'the call starts ms later: its peers wait that long',
    {
      worldSize: 2,
      faults: [{ rank: 0, op: 'allReduce', kind: 'delay', ms: 400 }],
    },
    async (ctx) => {
      // Clocks of one process's threads agree as timeOrigin + now; rank 1 may leave the barrier late
      // under load, so its wait is judged from when rank 0 issued the delayed call, not from its own start.
      const now = () => performance.timeOrigin + performance.now();
      await ctx.world.barrier();
      const issued = now();
      const t = Tensor.full([2], ctx.rank + 1);
      await ctx.world.allReduce(t);
      const ended = now();
      expect(t.toArray()).toEqual([3, 3]);
      const issuedByRank0 = (await ctx.world.broadcastObject(issued, { src: 0 })) as number;
      expect(ended - issuedByRank0).toBeGreaterThanOrEqual(399);
    },
  );

  rankTest(
    'a call issued behind a delayed one waits for it: streams keep their order',
    {
      worldSize: 2,
      faults: [{ rank: 0, nth: 0, kind: 'delay', ms: 200 }],
    },
    async (ctx) => {
      const g = ctx.world;
      if (ctx.rank === 0) {
        await Promise.all([1, 2, 3].map((v) => g.send(Tensor.full([1], v), 1)));
      } else {
        const got: number[] = [];
        for (let i = 0; i < 3; i++) {
          const t = Tensor.zeros([1]);
          await g.recv(t, 0);
          got.push(t.toArray()[0]);
        }
        expect(got).toEqual([1, 2, 3]);
      }
    },
  );
});

describe('chaos', () => {
  rankTest(
    'seeded delays leave results and stream order as they were',
    {
      worldSize: 4,
      chaos: { seed: 7, maxDelayMs: 20 },
    },
    async (ctx) => {
      const g = ctx.world;
      for (let step = 0; step < 5; step++) {
        const t = Tensor.full([3], ctx.rank * step);
        await g.allReduce(t);
        expect(t.toArray()).toEqual([6 * step, 6 * step, 6 * step]);
      }
      const right = (ctx.rank + 1) % 4;
      const left = (ctx.rank + 3) % 4;
      const sends = [0, 1, 2].map((i) => g.send(Tensor.full([1], 10 * ctx.rank + i), right));
      for (let i = 0; i < 3; i++) {
        const t = Tensor.zeros([1]);
        await g.recv(t, left);
        expect(t.toArray()).toEqual([10 * left + i]);
      }
      await Promise.all(sends);
      // A barrier held back by its delay waits for the calls before it, not for itself.
      const late = g.allReduce(Tensor.ones([2]));
      await g.barrier();
      expect(late.done()).toBe(true);
      await late;
    },
  );
});

describe('options', () => {
  const entry = new URL('./fixtures/spawn-threads-identity.ts', import.meta.url);

  it.each([
    [{ faults: {} }, /spawnThreads: faults must be an array/],
    [
      { faults: [{ rank: 5, kind: 'throw' }] },
      /faults\[0\]\.rank must be a rank of the job \(0\.\.1\), got 5/,
    ],
    [
      { faults: [{ rank: 0, kind: 'crash' }] },
      /faults\[0\]\.kind must be one of 'throw', 'exit', 'hang', 'delay', got "crash"/,
    ],
    [
      { faults: [{ rank: 0, kind: 'throw', op: 'allreduce' }] },
      /faults\[0\]\.op "allreduce" is not a communication call; one of: allReduce, /,
    ],
    [{ faults: [{ rank: 0, kind: 'throw', nth: -1 }] }, /faults\[0\]\.nth must be a non-negative integer/],
    [{ faults: [{ rank: 0, kind: 'delay' }] }, /faults\[0\]\.ms must be a number of milliseconds/],
    [{ faults: [{ rank: 0, kind: 'throw', ms: 5 }] }, /faults\[0\]\.ms is only for kind 'delay'/],
    [{ faults: [{ rank: 0, kind: 'throw', rnak: 1 }] }, /faults\[0\]: unknown key "rnak"/],
    [{ chaos: { seed: 1 } }, /chaos\.maxDelayMs must be a number of milliseconds/],
    [{ chaos: { seed: 1.5, maxDelayMs: 5 } }, /chaos\.seed must be an integer/],
    [{ chaos: { seed: 1, maxDelayMs: 5, max: 1 } }, /chaos: unknown key "max"/],
  ])('%j is refused before any rank starts', async (bad, message) => {
    await expect(spawnThreads(entry, { worldSize: 2, ...(bad as object) })).rejects.toThrow(message);
  });

  it('rankTest checks its faults when the file is collected, naming the test', () => {
    expect(() =>
      rankTest('y', { worldSize: 2, faults: [{ rank: 2, kind: 'exit' }] }, async () => {}),
    ).toThrow(/rankTest "y": faults\[0\]\.rank must be a rank of the job \(0\.\.1\), got 2/);
  });

  it('rankTest refuses unknown options when the file is collected', () => {
    expect(() =>
      rankTest('x', { worldSize: 2, arg: 1 } as unknown as { worldSize: number }, async () => {}),
    ).toThrow(/rankTest "x": unknown option "arg"; known options: worldSize, /);
  });
});

describe('spawnThreads', () => {
  it('a rank lost to an injected exit does not fail the job; its result is undefined', async () => {
    const entry = new URL('./fixtures/faults.ts', import.meta.url);
    const results = await spawnThreads(entry, { worldSize: 3, faults: [{ rank: 1, kind: 'exit' }] });
    expect(results[1]).toBeUndefined();
    for (const rank of [0, 2])
      expect(results[rank]).toMatch(/rank 1 \(rank-1\) exited with code \d+ before returning/);
  });

  it('a rank failing for another reason still fails the job', async () => {
    const entry = new URL('./fixtures/faults.ts', import.meta.url);
    const error = await spawnThreads(entry, {
      worldSize: 2,
      faults: [{ rank: 0, kind: 'throw' }],
      args: { rethrow: true },
    }).catch((e) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    // Whichever reported first: the rank the fault hit, or its peer, which it told.
    const hit = (error as JobFailedError).failures.find((f) => f.rank === 0);
    expect(hit?.error.name).toBe('InjectedFaultError');
  });
});

describe('FaultInjector', () => {
  const hooks = { abort: new AbortWord(), lost: () => {} };
  const delays = (seed: number, rank: number) => {
    const injector = FaultInjector.forRank(rank, undefined, { seed, maxDelayMs: 20 }, hooks)!;
    return Array.from({ length: 8 }, () => {
      const injection = injector.next('allReduce', 'allReduce on group "world"');
      return injection?.kind === 'delay' ? injection.ms : Number.NaN;
    });
  };

  it('chaos: the same seed gives a rank the same delays, call by call; another seed or rank others', () => {
    const first = delays(7, 1);
    expect(delays(7, 1)).toEqual(first);
    expect(delays(8, 1)).not.toEqual(first);
    expect(delays(7, 2)).not.toEqual(first);
    for (const ms of first) {
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(20);
    }
  });

  it('a rank without faults or chaos gets no injector: its calls take the fast path', () => {
    expect(FaultInjector.forRank(0, [{ rank: 1, kind: 'throw' }], undefined, hooks)).toBeUndefined();
  });
});
