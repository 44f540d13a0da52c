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
    calls: [...calls].sort(
      (a, b) =>
        a.startUs - b.startUs ||
        a.rank - b.rank ||
        (a.group < b.group ? -1 : a.group > b.group ? 1 : 0) ||
        a.seq - b.seq ||
        (a.op < b.op ? -1 : a.op > b.op ? 1 : 0),
    ),
  };
  if (options.report !== undefined) writeFileSync(options.report, `${JSON.stringify(report, null, 1)}\n`);
  if (options.trace !== undefined) {
    const trace = toPredictedTrace(report, (rank) => topology.placementOf(rank).node);
    writeFileSync(options.trace, JSON.stringify(trace));
  }
  return report;
}
