/**
 * Two predictions of one program side by side (`tensorcomm predict diff`):
 * two topologies, or two layouts of its groups. Calls are matched by rank,
 * group, seq and op, so a call matches its counterpart even when its size,
 * algorithm or timing differ; a key made twice (two groups of one name on a
 * rank) matches in the order each report lists them. Ratios are b / a: below
 * 1, b is faster.
 */
import type { PredictedCall, PredictReport } from './report.ts';
import { predictedEnd } from './report-table.ts';

export interface OpDiff {
  op: string;
  /** Matched calls, one per rank that made one. */
  calls: number;
  /** Summed time of the matched calls in a and in b. */
  aUs: number;
  bUs: number;
  ratio: number;
}

/** A rank's end in both reports; a rank only one report has leaves the other side out. */
export interface RankDiff {
  rank: number;
  aEndUs?: number;
  bEndUs?: number;
  ratio?: number;
}

export interface PredictDiff {
  /** Calls found in both. */
  matched: number;
  /** By a's time, longest first. */
  ops: OpDiff[];
  ranks: RankDiff[];
  onlyInA: PredictedCall[];
  onlyInB: PredictedCall[];
  /** The jobs' predicted ends (the latest rank's). */
  end: { aUs: number; bUs: number; ratio: number };
}

/** b / a; two zeros are equal (1), and something against nothing is Infinity. */
export function ratio(a: number, b: number): number {
  if (a > 0) return b / a;
  return b === 0 ? 1 : Number.POSITIVE_INFINITY;
}

/** `names` label the reports in the error when they have no call in common (the files, in the CLI). */
export function diffReports(
  a: PredictReport,
  b: PredictReport,
  names: readonly [string, string] = ['a', 'b'],
): PredictDiff {
  const key = (c: PredictedCall) => `${c.rank}\0${c.group}\0${c.seq}\0${c.op}`;
  const unmatchedB = new Map<string, PredictedCall[]>();
  for (const call of b.calls) unmatchedB.set(key(call), [...(unmatchedB.get(key(call)) ?? []), call]);

  const ops = new Map<string, OpDiff>();
  const onlyInA: PredictedCall[] = [];
  let matched = 0;
  for (const call of a.calls) {
    const other = unmatchedB.get(key(call))?.shift();
    if (!other) {
      onlyInA.push(call);
      continue;
    }
    matched++;
    const op = ops.get(call.op) ?? { op: call.op, calls: 0, aUs: 0, bUs: 0, ratio: 1 };
    op.calls++;
    op.aUs += call.endUs - call.startUs;
    op.bUs += other.endUs - other.startUs;
    ops.set(call.op, op);
  }
  if (matched === 0 && a.calls.length + b.calls.length > 0) {
    throw new RangeError(
      `${names[0]} and ${names[1]} have no call in common (calls match by rank, group, seq and op): ` +
        `${names[0]} has ${a.calls.length} calls on ${a.topology}, ${names[1]} ${b.calls.length} on ${b.topology}`,
    );
  }
  const leftInB = new Set([...unmatchedB.values()].flat());
  const onlyInB = b.calls.filter((call) => leftInB.has(call));

  const aEnd = predictedEnd(a).endUs;
  const bEnd = predictedEnd(b).endUs;
  return {
    matched,
    ops: [...ops.values()]
      .map((op) => ({ ...op, ratio: ratio(op.aUs, op.bUs) }))
      .sort((x, y) => y.aUs - x.aUs || x.op.localeCompare(y.op)),
    ranks: rankDiffs(a, b),
    onlyInA,
    onlyInB,
    end: { aUs: aEnd, bUs: bEnd, ratio: ratio(aEnd, bEnd) },
  };
}

function rankDiffs(a: PredictReport, b: PredictReport): RankDiff[] {
  const aEnds = new Map(a.ranks.map((r) => [r.rank, r.endUs]));
  const bEnds = new Map(b.ranks.map((r) => [r.rank, r.endUs]));
  const ranks = [...new Set([...aEnds.keys(), ...bEnds.keys()])].sort((x, y) => x - y);
  return ranks.map((rank) => {
    const aEndUs = aEnds.get(rank);
    const bEndUs = bEnds.get(rank);
    return aEndUs === undefined || bEndUs === undefined
      ? { rank, aEndUs, bEndUs }
      : { rank, aEndUs, bEndUs, ratio: ratio(aEndUs, bEndUs) };
  });
}
