/**
 * spawnThreads' `threads: 1`: every rank an async task of one thread, its
 * groups on TaskBackend. What ranks see must be what they see with a thread
 * each; hangs and mismatches fail as they do there; predictions are the same.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CollectiveMismatchError, JobFailedError, spawnThreads } from '../src/index.ts';
import { inRankTask, RankLocal, runAsRankTask } from '../src/runtime/rank-local.ts';
import type { scenarios } from './fixtures/predict-mode.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);
const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-tasks-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('RankLocal', () => {
  it('gives each rank task its own value, and the thread its own beside them', async () => {
    const slot = new RankLocal(() => [] as number[]);
    slot.set([-1]);
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    const seen = await Promise.all(
      [0, 1, 2].map((rank) =>
        runAsRankTask(async () => {
          slot.get().push(rank);
          await tick();
          slot.get().push(rank * 10);
          await tick();
          return { values: slot.get(), task: inRankTask() };
        }),
      ),
    );
    expect(seen).toEqual([
      { values: [0, 0], task: true },
      { values: [1, 10], task: true },
      { values: [2, 20], task: true },
    ]);
    expect(slot.get()).toEqual([-1]);
    expect(inRankTask()).toBe(false);
  });
});

describe('ranks as tasks of one thread', () => {
  it('every op the conformance suite leaves out gives what it gives with a thread per rank', async () => {
    const run = (threads?: number) =>
      spawnThreads<Record<string, unknown>>(fixture('task-ops-rank.ts'), {
        worldSize: 4,
        threads,
        collectiveTimeoutMs: 30_000,
      });
    const [threads, tasks] = [await run(), await run(1)];
    expect(Object.keys(tasks[0]).length).toBeGreaterThan(10);
    for (const name of Object.keys(threads[0])) {
      expect(
        tasks.map((r) => r[name]),
        name,
      ).toEqual(threads.map((r) => r[name]));
    }
  });

  it('a collective one rank never calls times out naming that rank', async () => {
    const error = await spawnThreads(fixture('task-faults-rank.ts'), {
      worldSize: 3,
      threads: 1,
      args: 'hang',
      collectiveTimeoutMs: 500,
      graceMs: 500,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    // The root causes; the rank that never came is stopped with the job after them.
    const timeouts = (error as JobFailedError).failures.slice(0, 2);
    expect(timeouts.map((f) => f.rank).sort()).toEqual([0, 1]);
    for (const { rank, error: e } of timeouts) {
      expect(e.name).toBe('CommTimeoutError');
      expect(e.message).toContain(
        `allReduce(float32[2], sum) call #0 on group "world": rank ${rank} timed out after 500 ms ` +
          'waiting for group rank 2 (global rank 2)',
      );
    }
  });

  it("a monitored barrier one rank never reaches: group rank 0 names it, the others report rank 0's words", async () => {
    const error = await spawnThreads(fixture('task-faults-rank.ts'), {
      worldSize: 3,
      threads: 1,
      args: 'monitored',
      graceMs: 500,
    }).catch((e: unknown) => e);
    const failures = (error as JobFailedError).failures;
    const message = (rank: number) => failures.find((f) => f.rank === rank)?.error.message;
    const where = 'monitoredBarrier() call #0 on group "world"';
    expect(message(0)).toBe(`${where}: rank 2 failed to pass monitoredBarrier within 500 ms`);
    expect(message(1)).toBe(
      `${where}: rank 1 arrived, but group rank 0 reports: rank 2 failed to pass monitoredBarrier within 500 ms`,
    );
  });

  it('a receive whose message never comes times out naming its sender', async () => {
    const error = await spawnThreads(fixture('task-faults-rank.ts'), {
      worldSize: 2,
      threads: 1,
      args: 'recv',
      collectiveTimeoutMs: 500,
      graceMs: 500,
    }).catch((e: unknown) => e);
    const [first] = (error as JobFailedError).failures;
    expect(first.rank).toBe(0);
    expect(first.error.name).toBe('CommTimeoutError');
    expect(first.error.message).toContain(
      'recv(float32[2], src=1, tag=0) on group "world": rank 0 timed out after 500 ms waiting for group rank 1 (global rank 1)',
    );
  });

  it('ranks that call differently fail with CollectiveMismatchError naming both calls', async () => {
    const error = await spawnThreads(fixture('task-faults-rank.ts'), {
      worldSize: 3,
      threads: 1,
      args: 'mismatch',
      collectiveTimeoutMs: 30_000,
    }).catch((e: unknown) => e);
    const { failures } = error as JobFailedError;
    expect(failures.map((f) => f.rank).sort()).toEqual([0, 1, 2]);
    for (const { error: e } of failures) expect(e.name).toBe(CollectiveMismatchError.name);
    const firstLine = (rank: number) => failures.find((f) => f.rank === rank)!.error.message.split('\n')[0];
    expect(firstLine(1)).toMatch(
      /^rank 1 called allReduce\(float32\[3\], sum\) as call #0 on group "world", but rank [02] called allReduce\(float32\[2\], sum\) as call #0$/,
    );
    for (const rank of [0, 2]) {
      expect(firstLine(rank)).toBe(
        `rank ${rank} called allReduce(float32[2], sum) as call #0 on group "world", but rank 1 called allReduce(float32[3], sum) as call #0`,
      );
    }
  });

  it('predicts the same report and trace as a thread per rank', async () => {
    const scenario = scenarioFixture<typeof scenarios>(fixture('predict-mode.ts'));
    let files = 0;
    const run = async (threads?: number) => {
      const report = join(dir, `report-${files}.json`);
      const trace = join(dir, `trace-${files++}.json`);
      const ranks = await scenario.run('step', (entry, args) =>
        spawnThreads(entry, { worldSize: 4, threads, args, predict: { topology: 'h100-ib', report, trace } }),
      );
      return { ranks, report: readFileSync(report, 'utf8'), trace: readFileSync(trace, 'utf8') };
    };
    const [threads, tasks] = [await run(), await run(1)];
    expect(JSON.parse(tasks.report).calls.length).toBeGreaterThan(20);
    expect(tasks.ranks).toEqual(threads.ranks);
    expect(tasks.report).toBe(threads.report);
    expect(tasks.trace).toBe(threads.trace);
  });

  it('refuses what needs a thread per rank, before any thread starts', async () => {
    const entry = fixture('task-ops-rank.ts');
    await expect(spawnThreads(entry, { worldSize: 4, threads: 2 })).rejects.toThrow(
      'spawnThreads: threads must be 4 (worldSize: a thread per rank, the default) or 1',
    );
    await expect(
      spawnThreads(entry, { worldSize: 2, threads: 1, devices: ['cpu', 'cuda:0'] }),
    ).rejects.toThrow('rank 1 is on cuda:0');
    await expect(
      spawnThreads(entry, { worldSize: 2, threads: 1, faults: [{ rank: 1, kind: 'exit' }] }),
    ).rejects.toThrow("an injected 'exit' fault takes out a rank's thread");
  });
});
