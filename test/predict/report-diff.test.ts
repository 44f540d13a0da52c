import { describe, expect, it } from 'vitest';
import type { PredictReport } from '../../src/predict/report.ts';
import { diffReports, ratio } from '../../src/predict/report-diff.ts';
import { reportA, reportB } from './report-samples.ts';

describe('diffReports', () => {
  it('matches calls by rank, group, seq and op, and compares ops, ranks and the job', () => {
    const a = reportA();
    const b = reportB();
    const diff = diffReports(a, b);
    expect(diff.matched).toBe(8);
    expect(diff.ops).toEqual([
      // a: 4 × 20 + 2 × 10 µs; b: 4 × 10 + 2 × 5 µs
      { op: 'allReduce', calls: 6, aUs: 100, bUs: 50, ratio: 0.5 },
      { op: 'allGather', calls: 2, aUs: 8, bUs: 16, ratio: 2 },
    ]);
    expect(diff.ranks).toEqual([
      { rank: 0, aEndUs: 100, bEndUs: 80, ratio: 0.8 },
      { rank: 1, aEndUs: 110, bEndUs: 88, ratio: 0.8 },
    ]);
    expect(diff.onlyInA).toEqual([a.calls[6], a.calls[7]]);
    expect(diff.onlyInB).toEqual([b.calls[8], b.calls[9]]);
    expect(diff.end).toEqual({ aUs: 110, bUs: 88, ratio: 0.8 });
  });

  it('a rank only one report has is shown without a ratio', () => {
    const b = reportB();
    b.ranks.push({ rank: 2, endUs: 5, computeUs: 5, commUs: 0, exposedCommUs: 0, waitUs: 0 });
    expect(diffReports(reportA(), b).ranks[2]).toEqual({ rank: 2, aEndUs: undefined, bEndUs: 5 });
  });

  it('a key made twice matches in the order each report lists it', () => {
    const a = reportA();
    const b = reportA();
    // two groups named "tp" on rank 0, both at seq 0: the first of a's meets the first of b's
    const tp = { rank: 0, group: 'tp', seq: 0, op: 'allReduce', bytes: 8, algorithm: 'ring', protocol: 'LL' };
    a.calls.push(
      { ...tp, startUs: 0, endUs: 1, busbwGBps: 0 },
      { ...tp, startUs: 0, endUs: 3, busbwGBps: 0 },
    );
    b.calls.push({ ...tp, startUs: 0, endUs: 2, busbwGBps: 0 });
    const diff = diffReports(a, b);
    expect(diff.onlyInA).toEqual([a.calls.at(-1)]);
    expect(diff.ops.find((o) => o.op === 'allReduce')).toMatchObject({ calls: 7, aUs: 101, bUs: 102 });
  });

  it('refuses two reports with no call in common, naming both', () => {
    const b: PredictReport = {
      ...reportB(),
      calls: reportB().calls.map((c) => ({ ...c, group: 'other' })),
    };
    expect(() => diffReports(reportA(), b, ['a.json', 'b.json'])).toThrow(
      'a.json and b.json have no call in common (calls match by rank, group, seq and op): ' +
        'a.json has 10 calls on test-a, b.json 10 on test-b',
    );
    // two programs without communication compare by their ends alone
    const quiet = { ...reportA(), calls: [] };
    expect(diffReports(quiet, quiet).end).toEqual({ aUs: 110, bUs: 110, ratio: 1 });
  });

  it('ratio: b / a, equal zeros 1, something against nothing Infinity', () => {
    expect(ratio(4, 1)).toBe(0.25);
    expect(ratio(0, 0)).toBe(1);
    expect(ratio(0, 2)).toBe(Number.POSITIVE_INFINITY);
  });
});
