/** Resource limits of thread ranks: a worldSize that cannot fit is refused up front, many ranks get small heaps; long kernels stop on abort. */
import os from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { JobFailedError, launchProcesses, spawnThreads, Tensor } from '../src/index.ts';
import { RankThreadPool } from '../src/launch/rank-thread-pool.ts';
import { DEFAULT_RANK_THREAD_BYTES, SMALL_HEAP_RANKS_PER_CORE } from '../src/launch/thread-memory.ts';
import { INTERRUPT_CHUNK_ELEMENTS, registerInterruptCheck } from '../src/tensor/interrupt.ts';
import { rankTest } from '../src/testing/index.ts';
import { FILL_FAILURE, type scenarios } from './fixtures/resource-limits.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';
import { settledThreadCount, threadCount, threadsBeforeJob } from './fixtures/spawn-threads-thread-count.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/resource-limits.ts', import.meta.url));
const GiB = 2 ** 30;

describe('spawnThreads memory check', () => {
  it('refuses a worldSize whose threads cannot fit, at once, naming the numbers', async () => {
    const before = await threadsBeforeJob();
    const job = spawnThreads(fixture.entry, { worldSize: 4, rankThreadBytes: 2 ** 50 });
    await expect(job).rejects.toThrow(RangeError);
    await expect(job).rejects.toThrow(
      /worldSize 4 needs about 4294967296 MiB for its rank threads \(1073741824 MiB each, rankThreadBytes\), but only \d+ MiB is available/,
    );
    expect(threadCount()).toBe(before);
  });

  it('refuses by the default estimate what this machine cannot hold', async () => {
    const worldSize = 4096;
    if (worldSize * DEFAULT_RANK_THREAD_BYTES <= os.freemem()) {
      console.warn(`skipped: ${worldSize} rank threads would fit in this machine's free memory`);
      return;
    }
    const before = await threadsBeforeJob();
    await expect(spawnThreads(fixture.entry, { worldSize })).rejects.toThrow(
      new RegExp(
        `worldSize ${worldSize} needs about ${(worldSize * DEFAULT_RANK_THREAD_BYTES) / 2 ** 20} MiB`,
      ),
    );
    expect(threadCount()).toBe(before);
  });

  it('a pool of warm threads counts only the threads it has to start', async () => {
    const pool = new RankThreadPool({ typeScript: true });
    try {
      const job = (worldSize: number, rankThreadBytes: number) =>
        fixture.run('rankOf', (entry, args) => pool.run(entry, { worldSize, args, rankThreadBytes }));
      expect(await job(2, 0)).toEqual([0, 1]);
      // Two warm threads, nothing to start: no estimate can refuse it.
      expect(await job(2, 2 ** 50)).toEqual([0, 1]);
      await expect(job(3, 2 ** 50)).rejects.toThrow(
        /worldSize 3 needs about 1073741824 MiB for the 1 rank threads it has to start/,
      );
    } finally {
      await pool.close();
    }
  });

  it('ranks that outnumber the cores many times over get a small young generation; others V8’s own', async () => {
    const many = SMALL_HEAP_RANKS_PER_CORE * os.availableParallelism();
    const youngMb = (worldSize: number, run = spawnThreads) =>
      fixture.run('youngGenerationMb', (entry, args) => run(entry, { worldSize, args }));
    expect(await youngMb(many)).toEqual(Array(many).fill(2));
    const few = await youngMb(2);
    expect(few.every((mb) => mb > 2)).toBe(true);
    const pool = new RankThreadPool({ typeScript: true });
    try {
      expect(await youngMb(many, (entry, options) => pool.run(entry, options))).toEqual(Array(many).fill(2));
    } finally {
      await pool.close();
    }
  });

  it('checks the estimate itself', async () => {
    await expect(spawnThreads(fixture.entry, { worldSize: 2, rankThreadBytes: -1 })).rejects.toThrow(
      /rankThreadBytes must be a non-negative integer, got -1/,
    );
  });
});

describe('long kernels and the job abort', () => {
  afterEach(() => registerInterruptCheck(undefined));

  it('fill_ checks for an interrupt between chunks and stops at the first that throws', () => {
    const t = Tensor.empty([3 * INTERRUPT_CHUNK_ELEMENTS], 'int8');
    let checks = 0;
    registerInterruptCheck(() => {
      checks++;
      throw new Error('aborted');
    });
    expect(() => t.fill_(5)).toThrow('aborted');
    expect(checks).toBe(1);
    expect(t.data[INTERRUPT_CHUNK_ELEMENTS - 1]).toBe(5);
    expect(t.data[INTERRUPT_CHUNK_ELEMENTS]).toBe(0);
  });

  it('copy_ between strided layouts checks too; small kernels never do', () => {
    const side = 2 ** 12 + 1;
    const src = Tensor.ones([side, side], 'int8');
    let checks = 0;
    registerInterruptCheck(() => void checks++);
    Tensor.empty([side, side], 'int8').copy_(src.transpose(0, 1));
    expect(checks).toBe(Math.floor((side * side) / INTERRUPT_CHUNK_ELEMENTS));
    checks = 0;
    Tensor.ones([1000], 'float32').fill_(2);
    expect(checks).toBe(0);
  });

  it('a rank filling 2 GiB in one fill_ ends promptly with the peer that failed', async () => {
    const before = await threadsBeforeJob();
    const flag = new SharedArrayBuffer(8);
    const args = { flag, bytes: 2 * GiB, failAfterMs: 200 };
    const job = fixture.run(
      'fillWhilePeerFails',
      (entry, a) => spawnThreads(entry, { worldSize: 2, args: a }),
      args,
    );
    const word = new Int32Array(flag);
    const wait = Atomics.waitAsync(word, 0, 0, 60_000);
    expect(await wait.value).not.toBe('timed-out');
    await expect(job).rejects.toThrow(new RegExp(`rank 0 \\(rank-0\\): Error: ${FILL_FAILURE}`));
    expect(await settledThreadCount(before)).toBe(before);
    // Its thread is gone: a fill that ran to its end (seconds here) before it went would have said so.
    expect(Atomics.load(word, 1), 'the fill ran to its end').toBe(0);
  }, 30_000);

  it('a process rank filling 2 GiB stops with the job abort, not at the end of its fill or by a signal', async () => {
    const args = { bytes: 2 * GiB, failAfterMs: 300 };
    const job = fixture.run(
      'fillWhilePeerFailsApart',
      // A grace period far longer than the fill: only the rank's own check can end it sooner.
      (entry, a) => launchProcesses(entry, { nproc: 2, args: a, graceMs: 60_000, output: () => {} }),
      args,
    );
    const failure = (await job.then(
      () => undefined,
      (error: unknown) => error,
    )) as JobFailedError;
    expect(failure).toBeInstanceOf(JobFailedError);
    // Without the check rank 1 finishes its fill and succeeds: it is among the failures only if stopped.
    const filler = failure.failures.find((f) => f.rank === 1);
    expect(filler, failure.message).toBeDefined();
    expect(filler?.error.message).toMatch(/rank 0/);
    expect(filler?.error.message).not.toMatch(/killed|SIGTERM|SIGKILL/);
  }, 60_000);
});

// rankTest takes the estimate as spawnThreads does (0: no check).
rankTest('a rank test sets rankThreadBytes', { worldSize: 2, rankThreadBytes: 0 }, (ctx) => {
  expect(ctx.worldSize).toBe(2);
});
