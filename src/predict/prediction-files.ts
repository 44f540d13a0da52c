/** Writes a predicted job's report and trace (predict options' `report` and `trace`) from every rank's part. */
import { writeFileSync } from 'node:fs';
import type { ResolvedPredictOptions } from './predict-options.ts';
import { toPredictedTrace } from './predicted-trace.ts';
import type { PredictedCall, PredictedRank, PredictReport } from './report.ts';
import type { Topology } from './topology.ts';

export function writePredictionFiles(
  ranks: readonly PredictedRank[],
  calls: readonly PredictedCall[],
  topology: Topology,
  options: ResolvedPredictOptions,
): PredictReport {
  const report: PredictReport = {
    topology: topology.name,
    ranks: [...ranks].sort((a, b) => a.rank - b.rank),
    // In time order, then by rank: how a reader follows the job (and the same order for the same job).
    calls: numberPointToPoint(calls).sort(
      (a, b) =>
        a.startUs - b.startUs ||
        a.rank - b.rank ||
        compareText(a.group, b.group) ||
        a.seq - b.seq ||
        compareText(a.op, b.op),
    ),
  };
  if (options.report !== undefined) writeFileSync(options.report, `${JSON.stringify(report, null, 1)}\n`);
  if (options.trace !== undefined) {
    const trace = toPredictedTrace(report, (rank) => topology.placementOf(rank).node);
    writeFileSync(options.trace, JSON.stringify(trace));
  }
  return report;
}

/**
 * Point-to-point calls numbered per rank and group in predicted-time order
 * (then by peer, op and bytes: calls alike in all of them are alike in the
 * report too). The order a rank issued them in is no good: where a layer
 * issues them from tasks of its own (a weight sync's transfers), it is the
 * real run's race, and a report must not depend on that.
 */
function numberPointToPoint(calls: readonly PredictedCall[]): PredictedCall[] {
  const p2p = calls
    .filter((c) => c.peer !== undefined)
    .sort(
      (a, b) =>
        a.rank - b.rank ||
        compareText(a.group, b.group) ||
        a.startUs - b.startUs ||
        a.endUs - b.endUs ||
        (a.peer as number) - (b.peer as number) ||
        compareText(a.op, b.op) ||
        a.bytes - b.bytes,
    );
  const counts = new Map<string, number>();
  const numbered = p2p.map((c) => {
    const key = `${c.rank}\0${c.group}`;
    const seq = counts.get(key) ?? 0;
    counts.set(key, seq + 1);
    return { ...c, seq };
  });
  return [...calls.filter((c) => c.peer === undefined), ...numbered];
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
