/** Failure messages in the program's terms: no store keys, no internal tags or group names, one hang report per job. */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { JobFailedError, RankFailedError, spawnThreads, Tensor } from '../src/index.ts';
import { describeFailures, jobFailure } from '../src/launch/job-options.ts';
import { rankTest } from '../src/testing/index.ts';
import { failure } from './fixtures/failure.ts';

const INTERNALS = /destGet|srcWaitUntilGetFinished|no rank has set this key|call #-1|managed\[|p2p on group/;

describe('timeouts', () => {
  rankTest('a receive names itself and its peer', { worldSize: 2 }, async (ctx) => {
    if (ctx.rank === 1) {
      await sleep(1_000);
      return;
    }
    const error = await failure(ctx.world.recv(Tensor.zeros([4]), 1, { timeoutMs: 400 }));
    expect(error.message).toMatch(
      /^recv\(float32\[4\], src=1, tag=0\) on group "world": rank 0 timed out after 400 ms waiting for group rank 1 \(global rank 1\)\nhang report/,
    );
    expect(error.message).toMatch(/rank 1: running its own code/);
    expect(error.message).not.toMatch(INTERNALS);
  });

  rankTest('a p2p message between workers shows no reserved tag', { worldSize: 2 }, async (ctx) => {
    const pair = await ctx.collective.createCollectiveGroup(['rank-0', 'rank-1']);
    if (ctx.rank === 1) {
      await sleep(1_000);
      return;
    }
    const error = await failure(pair.recv({ timeoutMs: 400 }));
    expect(error.message).toMatch(/recvObject\(src=1\) on group "ranks 0, 1": rank 0 timed out after 400 ms/);
    expect(error.message).not.toMatch(/tag=/);
    expect(error.message).not.toMatch(INTERNALS);
  });

  // Past what the group's shared region serves (256 KiB between 3 ranks): the keyed store, where a root waits for its readers.
  rankTest(
    'a root names the ranks that did not read its value',
    {
      worldSize: 3,
      debug: { checks: false },
    },
    async (ctx) => {
      if (ctx.rank !== 0) {
        await sleep(1_000);
        return;
      }
      const error = await failure(ctx.world.broadcast(Tensor.ones([1 << 18]), { src: 0, timeoutMs: 400 }));
      expect(error.message).toMatch(
        /^broadcast\(float32\[262144\], src=0\) call #0 on group "world": rank 0 timed out after 400 ms waiting for group ranks 1, 2 \(global ranks 1, 2\) to read its value/,
      );
      expect(error.message).not.toMatch(INTERNALS);
    },
  );

  // A small one meets in the region, where every rank waits for all to come.
  rankTest('a root of a small broadcast names the ranks that did not come', { worldSize: 3 }, async (ctx) => {
    if (ctx.rank !== 0) {
      await sleep(1_000);
      return;
    }
    const error = await failure(ctx.world.broadcast(Tensor.ones([4]), { src: 0, timeoutMs: 400 }));
    expect(error.message).toMatch(
      /^broadcast\(float32\[4\], src=0\) call #0 on group "world": rank 0 timed out after 400 ms waiting for group ranks 1, 2 \(global ranks 1, 2\)\nhang report/,
    );
    expect(error.message).not.toMatch(INTERNALS);
  });
});

rankTest('managed groups are named by their ranks', { worldSize: 3 }, async (ctx) => {
  expect(ctx.manager.getGroup([0, 2]).name).toBe('ranks 0, 2');
});

it('a job prints the hang report of its first timed-out rank only', () => {
  const report = (rank: number) =>
    `allReduce(float32[4], sum) call #0 on group "world": rank ${rank} timed out after 500 ms waiting for group rank 2 (global rank 2)\nhang report (rank ${rank}, after waiting 500.0 ms):\nrank 2: running its own code`;
  const text = describeFailures(
    [0, 1].map((rank) => ({
      rank,
      error: Object.assign(new Error(report(rank)), { name: 'CommTimeoutError' }),
    })),
    ['rank-0', 'rank-1', 'rank-2'],
  );
  expect(text.match(/hang report \(rank/g)).toEqual(['hang report (rank']);
  expect(text).toContain(`${report(0)}\n`);
  expect(text).toMatch(
    /rank 1 timed out after 500 ms waiting for group rank 2 \(global rank 2\)\n\(hang report: see rank 0's above\)$/,
  );
});

describe('a failed job lists its root cause first', () => {
  it('even when the echo of a peer reached the launcher before it', async () => {
    const error = await spawnThreads(new URL('./fixtures/late-root-cause.ts', import.meta.url), {
      worldSize: 2,
      faults: [{ rank: 1, op: 'allReduce', kind: 'throw' }],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures, message } = error as JobFailedError;
    expect(failures.map((f) => [f.rank, f.error.name])).toEqual([
      [1, 'InjectedFaultError'],
      [0, 'RankFailedError'],
    ]);
    expect(message).toMatch(/^2 rank\(s\) failed: 1, 0\n {2}rank 1 \(rank-1\): InjectedFaultError: /);
  });

  it('causes keep the order they came in, and so do their echoes', () => {
    const echo = (rank: number) => ({ rank, error: new RankFailedError(`rank 3 failed (${rank})`, 3) });
    const cause = (rank: number) => ({ rank, error: new Error(`boom ${rank}`) });
    const failed = jobFailure([echo(0), cause(3), echo(1), cause(2)], ['a', 'b', 'c', 'd']);
    expect(failed.failures.map((f) => f.rank)).toEqual([3, 2, 0, 1]);
    expect(failed.message.split('\n')[0]).toBe('4 rank(s) failed: 3, 2, 0, 1');
    expect(failed.cause).toBe(failed.failures[0].error);
  });
});
