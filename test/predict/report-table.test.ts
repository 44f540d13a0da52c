import { describe, expect, it } from 'vitest';
import { predictedEnd, predictedOpRows, predictedRankRows } from '../../src/predict/report-table.ts';
import { reportA, twoNodeReport } from './report-samples.ts';

describe('the figures of predict show', () => {
  it('one row per (group, op, size): first-seen op order, sizes ascending, a collective once per rank', () => {
    expect(predictedOpRows(reportA())).toEqual([
      {
        group: 'world',
        op: 'allReduce',
        bytes: 500_000,
        calls: 2,
        algorithm: 'ring',
        protocol: 'LL128',
        timeUs: 10,
        algbwGBps: 50,
        busbwGBps: 50,
      },
      {
        group: 'world',
        op: 'allReduce',
        bytes: 1_000_000,
        calls: 4,
        algorithm: 'ring',
        protocol: 'Simple',
        timeUs: 20,
        algbwGBps: 50,
        busbwGBps: 50,
      },
      {
        group: 'world',
        op: 'allGather',
        bytes: 4000,
        calls: 2,
        algorithm: 'ring',
        protocol: 'LL',
        timeUs: 4,
        algbwGBps: 1,
        busbwGBps: 0.5,
      },
      expect.objectContaining({ op: 'send', bytes: 2000, calls: 1, timeUs: 2, algbwGBps: 1 }),
      expect.objectContaining({ op: 'recv', bytes: 2000, calls: 1, timeUs: 2, algbwGBps: 1 }),
    ]);
  });

  it('a row of unlike calls weighs each by its time and names every algorithm', () => {
    const call = { group: 'tp', seq: 0, op: 'allReduce', bytes: 1_000_000, protocol: 'Simple' };
    const report = twoNodeReport(2, 30, [
      { ...call, rank: 0, algorithm: 'ring', startUs: 0, endUs: 10, busbwGBps: 10 },
      { ...call, rank: 1, algorithm: 'tree', startUs: 0, endUs: 30, busbwGBps: 30 },
    ]);
    // 2 MB in 40 µs; bus bytes 10 × 10e3 + 30 × 30e3 = 1 MB over 40 µs
    expect(predictedOpRows(report)).toEqual([
      {
        group: 'tp',
        op: 'allReduce',
        bytes: 1_000_000,
        calls: 2,
        algorithm: 'ring,tree',
        protocol: 'Simple',
        timeUs: 20,
        algbwGBps: 50,
        busbwGBps: 25,
      },
    ]);
    expect(predictedOpRows({ ...report, calls: [] })).toEqual([]);
  });

  it('per rank: its totals, the overlapped part, and the job end at the latest rank', () => {
    const report = reportA();
    report.ranks.reverse();
    expect(predictedRankRows(report)).toEqual([
      { rank: 0, endUs: 100, computeUs: 60, commUs: 56, exposedCommUs: 30, waitUs: 4, overlappedCommUs: 26 },
      { rank: 1, endUs: 110, computeUs: 70, commUs: 56, exposedCommUs: 36, waitUs: 0, overlappedCommUs: 20 },
    ]);
    expect(predictedEnd(report)).toEqual({ endUs: 110, rank: 1 });
  });

  it('overlap is never negative where the sums round apart', () => {
    const report = reportA();
    report.ranks[0].exposedCommUs = report.ranks[0].commUs + 1e-9;
    expect(predictedRankRows(report)[0].overlappedCommUs).toBe(0);
  });
});
