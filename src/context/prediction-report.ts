/**
 * A predicting job's report, made as its ranks leave: every rank's calls and
 * totals go to rank 0 over the world group (so threads, processes and nodes
 * alike), which writes the report and the predicted trace.
 */
import type { ResolvedPredictOptions } from '../predict/predict-options.ts';
import { writePredictionFiles } from '../predict/prediction-files.ts';
import type { RankClock } from '../predict/rank-clock.ts';
import type { PredictedCall, PredictedRank } from '../predict/report.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';

interface RankPart {
  totals: PredictedRank;
  calls: readonly PredictedCall[];
}

export async function writePrediction(
  world: ThreadGroup,
  clock: RankClock,
  options: ResolvedPredictOptions,
): Promise<void> {
  if (options.report === undefined && options.trace === undefined) return;
  const part: RankPart = { totals: clock.totals(), calls: clock.calls() };
  // A gather that fails does so because a peer failed or left: that failure is the job's, this rank's
  // part of it (no report) is no second one.
  const parts = (await world.gatherObject(part, { dst: 0 }).catch(() => undefined)) as RankPart[] | undefined;
  if (parts === undefined) return;
  writePredictionFiles(
    parts.map((p) => p.totals),
    parts.flatMap((p) => p.calls),
    clock.topology,
    options,
  );
}
