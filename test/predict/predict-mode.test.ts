/**
 * Predict mode on running jobs: results exact, each rank's virtual clock
 * following DESIGN's rules (a collective starts when its last member arrives,
 * a receive completes at the later of its post and the message's arrival, an
 * async call overlaps the rank's compute until awaited), the same report
 * whatever the timing of the real run, on threads and processes.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  launchProcesses,
  loadTopology,
  type PredictReport,
  predictCollective,
  spawnThreads,
} from '../../src/index.ts';
import type { scenarios } from '../fixtures/predict-mode.ts';
import { scenarioFixture } from '../fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('../fixtures/predict-mode.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-predict-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const topology = loadTopology('h100-nvlink');
const quiet = () => {};
let files = 0;

/** A thread job of `worldSize` ranks predicting on h100-nvlink; its ranks' results and its report. */
async function predicted<K extends keyof typeof scenarios>(
  scenario: K,
  worldSize: number,
  args: object = {},
  extra: object = {},
) {
  const report = join(dir, `report-${files}.json`);
  const trace = join(dir, `trace-${files++}.json`);
  const ranks = await fixture.run(
    scenario,
    (entry, a) =>
      spawnThreads(entry, {
        worldSize,
        args: a,
        predict: { topology: 'h100-nvlink', report, trace },
        ...extra,
      }),
    args,
  );
  return {
    ranks,
    report: JSON.parse(readFileSync(report, 'utf8')) as PredictReport,
    trace: JSON.parse(readFileSync(trace, 'utf8')) as {
      traceEvents: { ph: string; tid: number; ts: number }[];
    },
  };
}

const allReduceUs = (bytes: number, ranks: number) =>
  predictCollective({ op: 'allReduce', bytes, ranks, topology }).us;

describe('predict mode', () => {
  it('a collective starts when its last member arrives: a straggler shows as its peers’ wait', async () => {
    const { ranks, report, trace } = await predicted('straggler', 4);
    const us = allReduceUs(4096, 4);
    expect(us).toBeGreaterThan(0);
    for (const r of ranks) {
      expect(r.values).toEqual([10]);
      expect(r.now).toBeCloseTo(300 + us, 6);
    }
    expect(report.topology).toBe(topology.name);
    expect(report.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    report.ranks.forEach((r) => {
      expect(r.computeUs).toBe(100 * r.rank);
      expect(r.waitUs).toBeCloseTo(300 - 100 * r.rank, 6);
      expect(r.exposedCommUs).toBeCloseTo(us, 6);
      expect(r.commUs).toBeCloseTo(us, 6);
      expect(r.endUs).toBeCloseTo(300 + us, 6);
    });
    expect(report.calls).toHaveLength(4);
    for (const call of report.calls) {
      expect(call).toMatchObject({ group: 'world', seq: 0, op: 'allReduce', bytes: 4096, startUs: 300 });
      expect(call.endUs).toBeCloseTo(300 + us, 6);
      expect(call.busbwGBps).toBeGreaterThan(0);
    }
    // The trace: a slice per call, on its rank's track, at its predicted start.
    const slices = trace.traceEvents.filter((e) => e.ph === 'X');
    expect(slices.map((e) => [e.tid, e.ts]).sort()).toEqual([
      [0, 300],
      [1, 300],
      [2, 300],
      [3, 300],
    ]);
  });

  it('an async allReduce behind longer compute exposes nothing', async () => {
    const us = allReduceUs(4096, 2);
    const computeUs = 1000 * us;
    const { ranks, report } = await predicted('overlapped', 2, { computeUs });
    expect(ranks.map((r) => r.values)).toEqual([[2], [2]]);
    for (const r of ranks) expect(r.now).toBe(computeUs);
    for (const r of report.ranks) {
      expect(r).toMatchObject({ endUs: computeUs, computeUs, exposedCommUs: 0, waitUs: 0 });
      expect(r.commUs).toBeCloseTo(us, 6);
    }
  });

  it("a group's collectives run one after another, as on one NCCL stream", async () => {
    const us = allReduceUs(16384, 2);
    const { ranks, report } = await predicted('backToBack', 2);
    expect(ranks.map((r) => r.values)).toEqual([
      [2, 4],
      [2, 4],
    ]);
    for (const r of ranks) expect(r.now).toBeCloseTo(2 * us, 6);
    const rank0 = report.calls.filter((c) => c.rank === 0);
    expect(rank0.map((c) => [c.seq, c.startUs])).toEqual([
      [0, 0],
      [1, rank0[0].endUs],
    ]);
  });

  it('a receive completes at the later of its post and the message’s arrival', async () => {
    const transferUs = predictCollective({ op: 'send', bytes: 1024, ranks: [0, 1], topology }).us;
    const { ranks, report } = await predicted('sendRecv', 2);
    expect(ranks[1].values).toEqual([7]);
    expect(ranks[0].now).toBeCloseTo(500 + transferUs, 6);
    expect(ranks[1].now).toBeCloseTo(500 + transferUs, 6);
    const recv = report.calls.find((c) => c.op === 'recv');
    expect(recv).toMatchObject({ rank: 1, peer: 0, bytes: 1024, startUs: 500 });
    expect(report.ranks[1].waitUs).toBeCloseTo(500, 6);
  });

  it('a receive reads its own message’s stamp with more stamps outstanding than a board holds', async () => {
    const perTag = 40;
    const transferUs = predictCollective({ op: 'send', bytes: 16, ranks: [0, 1], topology }).us;
    // Rank 0's message i (tag 1's first, then tag 0's) starts at 20 (i + 1) µs; rank 1 receives tag 0's
    // first, each posted when the one before completed.
    const expected: number[] = [];
    let clock = 100;
    for (const first of [perTag, 0]) {
      for (let i = first; i < first + perTag; i++) {
        clock = Math.max(clock, 20 * (i + 1) + transferUs);
        expected.push(clock);
      }
    }
    const tagged = (tag: number) => Array.from({ length: perTag }, (_, i) => 100 * tag + i);
    const threads = await predicted('sendAhead', 2, { perTag });
    expect(threads.ranks[1].values).toEqual([...tagged(0), ...tagged(1)]);
    for (const [i, at] of threads.ranks[1].clocks.entries()) expect(at).toBeCloseTo(expected[i], 6);
    const processes = await fixture.run(
      'sendAhead',
      (entry, args) =>
        launchProcesses(entry, { nproc: 2, args, output: quiet, predict: { topology: 'h100-nvlink' } }),
      { perTag },
    );
    expect(processes).toEqual(threads.ranks);
  });

  it('gives the same report whatever the real run’s timing (chaos delays), on threads and processes', async () => {
    const calm = await predicted('step', 4);
    const shaken = await predicted('step', 4, {}, { chaos: { seed: 7, maxDelayMs: 4 } });
    expect(shaken.report).toEqual(calm.report);
    expect(shaken.ranks).toEqual(calm.ranks);
    const report = join(dir, 'processes.json');
    const processes = await fixture.run('step', (entry, args) =>
      launchProcesses(entry, { nproc: 4, args, output: quiet, predict: { topology: 'h100-nvlink', report } }),
    );
    expect(processes).toEqual(calm.ranks);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toEqual(calm.report);
    // Every rank's values are exact: sums over the world and the halves, rank 0's broadcast, the ring.
    calm.ranks.forEach((r, rank) => {
      expect(r.values.slice(0, 4)).toEqual([6, 2, 0, (rank + 3) % 4]);
    });
  });

  it('a rank that fails fails the job with its own error first, and no report is written', async () => {
    const report = join(dir, 'failed.json');
    const started = Date.now();
    const error = await fixture
      .run('failing', (entry, args) =>
        spawnThreads(entry, { worldSize: 3, args, predict: { topology: 'h100-nvlink', report } }),
      )
      .catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^1 rank\(s\) failed: 2\n.*rank 2 fails on purpose/);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(() => readFileSync(report)).toThrow(/ENOENT/);
  });

  it('leaves ctx.predict undefined in a job that does not predict', async () => {
    const ranks = await fixture.run('plain', (entry, args) => spawnThreads(entry, { worldSize: 2, args }));
    expect(ranks).toEqual([{ predict: 'undefined' }, { predict: 'undefined' }]);
  });

  it('refuses a job with more ranks than the topology has GPUs, naming both numbers', async () => {
    await expect(
      spawnThreads(fixture.entry, { worldSize: 9, predict: { topology: 'h100-nvlink' } }),
    ).rejects.toThrow(/9 ranks .* 8 GPUs/);
    await expect(
      spawnThreads(fixture.entry, {
        worldSize: 2,
        predict: { topology: 'h100-nvlink', reprot: 'x' } as never,
      }),
    ).rejects.toThrow(/reprot/);
  });
});
