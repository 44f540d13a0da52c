/**
 * The cold-calls bench (bench/cold-calls.ts): which calls each span takes,
 * its mean from a job's clock readings, medians and paired ratios over jobs
 * (and of the jobs without TurboFan, and of Node's own floor), the goals'
 * verdicts, and a smoke run of one tiny job. No timing is
 * asserted: only that figures exist and the table reads.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  COLD_CASES,
  type ColdCase,
  clockCounts,
  runColdCallsBench,
  type SpanFigures,
  spanMeanUs,
  summarize,
  verdicts,
} from '../bench/cold-calls.ts';

const roundTrip = (spans: ColdCase['spans']): ColdCase => ({ ranks: 2, op: 'roundTrip', bytes: 4, spans });

describe('cold-calls bench', () => {
  it('reads the clock at every span end, once each, in order, never at call 0', () => {
    expect(
      clockCounts([
        { from: 1_000, to: 10_000 },
        { from: 0, to: 1_000 },
        { from: 0, to: 3_000 },
      ]),
    ).toEqual([1_000, 3_000, 10_000]);
  });

  it("takes a span's mean per call from the readings at its two ends (call 0 at time 0)", () => {
    const counts = [1_000, 3_000, 10_000];
    const ms = [40, 60, 95];
    expect(spanMeanUs(counts, ms, { from: 0, to: 1_000 })).toBeCloseTo(40);
    expect(spanMeanUs(counts, ms, { from: 1_000, to: 10_000 })).toBeCloseTo((55 * 1000) / 9_000);
    expect(spanMeanUs(counts, ms, { from: 0, to: 3_000 })).toBeCloseTo(20);
  });

  it("gives each span the median over jobs and the median of the paired jobs' ratios, not the ratio of medians", () => {
    const theCase = roundTrip([{ from: 0, to: 1_000 }]);
    const [figures] = summarize(theCase, [[10], [20], [90]], [[1], [10], [3]]);
    expect(figures.tensorcommUs).toBeCloseTo(20);
    expect(figures.mpiUs).toBeCloseTo(3);
    // Pairs: 10/1, 20/10, 90/3 -> 10, 2, 30; their median is 10 (the medians' ratio would be 6.67).
    expect(figures.ratio).toBeCloseTo(10);
    const [alone] = summarize(theCase, [[10]], undefined);
    expect(alone.mpiUs).toBeUndefined();
    expect(alone.ratio).toBeUndefined();
    expect(alone.noTurbofanUs).toBeUndefined();
    expect(alone.floorUs).toBeUndefined();
    const [beside] = summarize(theCase, [[10]], undefined, [[4], [30], [6]], [[2], [1], [3]]);
    expect(beside.noTurbofanUs).toBeCloseTo(6);
    expect(beside.floorUs).toBeCloseTo(2);
  });

  it('judges absolute and ratio goals, leaving out a ratio goal without Open MPI', () => {
    const span = { from: 0, to: 3_000, goals: [{ maxUs: 5 }, { maxRatio: 10 }] };
    const figures = (tensorcommUs: number, ratio?: number): SpanFigures => ({
      ranks: 2,
      op: 'roundTrip',
      bytes: 4,
      span,
      tensorcommUs,
      ratio,
    });
    expect(verdicts(figures(4, 12))).toEqual(['<=5us:met', '<=10x:MISSED']);
    expect(verdicts(figures(6, 9))).toEqual(['<=5us:MISSED', '<=10x:met']);
    expect(verdicts(figures(6))).toEqual(['<=5us:MISSED']);
    expect(verdicts({ ...figures(6), span: { from: 0, to: 1_000 } })).toEqual([]);
  });

  it("carries issue 42's goals: the round trip's first 3,000 (5 us, moonshot 10x), warm 5x, the short oversubscribed jobs", () => {
    const goalsOf = (ranks: number, op: string) =>
      COLD_CASES.find((c) => c.ranks === ranks && c.op === op)
        ?.spans.filter((s) => s.goals)
        .map((s) => ({ from: s.from, to: s.to, warm: s.warm ?? false, goals: s.goals }));
    expect(goalsOf(2, 'roundTrip')).toEqual([
      { from: 0, to: 3_000, warm: false, goals: [{ maxUs: 5 }, { maxRatio: 10 }] },
      { from: 15_000, to: 25_000, warm: true, goals: [{ maxRatio: 5 }] },
    ]);
    expect(goalsOf(2, 'allReduce')).toEqual([
      { from: 15_000, to: 25_000, warm: true, goals: [{ maxRatio: 5 }] },
    ]);
    for (const [ranks, calls, maxRatio] of [
      [4, 1_200, 3],
      [8, 600, 3],
      [64, 60, 2],
    ]) {
      expect(goalsOf(ranks, 'allReduce')).toEqual([
        { from: 0, to: calls, warm: false, goals: [{ maxRatio }] },
      ]);
    }
    for (const theCase of COLD_CASES.filter((c) => c.ranks > 2)) {
      expect(theCase.bytes).toBe(1024);
      expect(theCase.spans).toContainEqual({ from: 0, to: 1_000 });
    }
  });

  it('runs a fresh job per case and prints one row per span, cold and warm said', async () => {
    const lines: string[] = [];
    const report = await runColdCallsBench({
      jobs: 1,
      cases: [
        roundTrip([
          { from: 0, to: 50 },
          { from: 50, to: 100, warm: true, goals: [{ maxUs: 1e9 }] },
        ]),
      ],
      log: (line) => lines.push(line),
    });
    expect(lines[0]).toMatch(/^# cold vs warm: .*fresh job's first call/);
    const header = lines.find((l) => l.startsWith('#') && l.includes('tensorcomm(us)')) as string;
    expect(header.slice(1).trim().split(/\s+/)).toEqual([
      'ranks',
      'op',
      'size(B)',
      'calls',
      'tensorcomm(us)',
      'no-TurboFan(us)',
      'node-floor(us)',
      'openmpi(us)',
      'ratio',
      'goal',
    ]);
    const rows = lines.slice(lines.indexOf(header) + 1);
    expect(rows.map((r) => r.trim().split(/\s+/)[3])).toEqual(['1-50(cold)', '51-100(warm)']);
    expect(rows[1]).toMatch(/<=1000000000us:met$/);
    expect(report.spans.map((s) => s.tensorcommUs > 0)).toEqual([true, true]);
    expect(report.spans.map((s) => (s.noTurbofanUs ?? 0) > 0)).toEqual([true, true]);
    expect(report.spans.map((s) => (s.floorUs ?? 0) > 0)).toEqual([true, true]);
    if (report.skipped === undefined) expect(report.spans.every((s) => (s.mpiUs ?? 0) > 0)).toBe(true);
  }, 120_000);

  it("refuses Node's floor without ascending call counts, saying how to call it", () => {
    const floor = fileURLToPath(new URL('../bench/floors/sab_cold_calls.mjs', import.meta.url));
    for (const args of [[], ['3000', '1000'], ['0'], ['ten']]) {
      const run = spawnSync(process.execPath, [floor, ...args], { encoding: 'utf8', timeout: 30_000 });
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(/usage: sab_cold_calls.mjs COUNT\.\.\. \(ascending positive integers\)/);
    }
  });
});
