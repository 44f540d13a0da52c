/**
 * The prediction against tensorcomm's own runs (issue 41's checks "Against
 * itself" and "Cost"). First the model against this machine: calibrate on 2
 * processes and on 2 "nodes" over loopback from two sizes (`tensorcomm
 * predict calibrate`'s fit), then time other sizes and other collectives on
 * both and print each beside what the calibrated topology predicts; goal: a
 * median error of at most 20% from 1 MiB, p95 reported. Then what predict
 * mode adds to a job's wall time (predict-cost.ts).
 *
 *   npx tsx bench/predict.ts [--quick] [--json <file>]
 */
import type { CollectiveOp } from '../src/cli/bench/collectives-rank.ts';
import { median } from '../src/cli/bench/median.ts';
import { type Column, fixed, formatTable } from '../src/cli/bench/table.ts';
import {
  BACKEND_LABELS,
  type CalibrationBackend,
  MODEL_OPS,
  measureBackend,
} from '../src/cli/calibration-runs.ts';
import { calibratedSpec, calibrateLinks, fitLines } from '../src/cli/predict-calibrate.ts';
import { loadTopology, predictCollective } from '../src/index.ts';
import type { AlphaBetaFit } from '../src/predict/calibration-fit.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { type CostReport, runPredictCost } from './predict-cost.ts';

export const ACCURACY_GOAL = 0.2;
const KiB = 1024;
const MiB = 1024 * KiB;
/** The errors judged: from 1 MiB, where bandwidth rather than the machine's jitter decides. */
const JUDGED_FROM = MiB;

/**
 * Calibration from two sizes, neither predicted below: a small one for latency, a large one (between
 * two predicted sizes) for bandwidth. Predicted: a size below the judged range, and 1 to 64 MiB.
 */
const FULL = {
  calibration: [4 * KiB, 32 * MiB],
  sizes: [64 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB],
  budgetMs: 200,
  batches: 5,
};
const QUICK = { calibration: [4 * KiB, 4 * MiB], sizes: [MiB], budgetMs: 20, batches: 3 };
const OPS: readonly CollectiveOp[] = ['allReduce', 'allGather', 'reduceScatter', 'broadcast', 'sendRecv'];
const BACKENDS: readonly CalibrationBackend[] = ['processes', 'nodes'];
/** Ranks a node in the calibrated topology: the processes' 2 on node 0, the nodes' pair on nodes 0 and 1. */
const RANKS_PER_NODE = 2;

export interface AccuracyRow {
  backend: CalibrationBackend;
  op: CollectiveOp;
  bytes: number;
  measuredUs: number;
  predictedUs: number;
  /** predicted / measured - 1: negative where the model is faster. */
  error: number;
}

export interface ErrorSummary {
  calls: number;
  median: number;
  p95: number;
}

export interface AccuracyReport {
  /** Each link's fitted alpha-beta terms (absent rates: D = B, reductions free). */
  links: ({ link: string; backend: CalibrationBackend } & AlphaBetaFit)[];
  rows: AccuracyRow[];
  judged: ErrorSummary;
  goal: { median: number; met: boolean };
}

/** The 95th percentile by nearest rank. */
function p95(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(0.95 * sorted.length) - 1)];
}

/** Median and p95 of the absolute errors of the rows from 1 MiB. */
function summary(rows: readonly AccuracyRow[]): ErrorSummary {
  const errors = rows.filter((r) => r.bytes >= JUDGED_FROM).map((r) => Math.abs(r.error));
  return { calls: errors.length, median: median(errors), p95: p95(errors) };
}

const percent = (ratio: number) => `${ratio >= 0 ? '+' : ''}${(ratio * 100).toFixed(1)}%`;

const COLUMNS: readonly Column<AccuracyRow>[] = [
  { title: 'ranks', width: 11, cell: (r) => r.backend },
  { title: 'op', width: 15, cell: (r) => r.op },
  { title: 'size(B)', width: 11, cell: (r) => String(r.bytes) },
  { title: 'measured(us)', width: 14, cell: (r) => fixed(r.measuredUs, 1) },
  { title: 'predicted(us)', width: 15, cell: (r) => fixed(r.predictedUs, 1) },
  { title: 'error', width: 9, cell: (r) => percent(r.error) },
];

function summaryLine(label: string, s: ErrorSummary): string {
  return `# ${label}: ${s.calls} calls from 1 MiB, |error| median ${(s.median * 100).toFixed(1)}%, p95 ${(s.p95 * 100).toFixed(1)}%`;
}

export async function runPredictAccuracy(options: { quick: boolean; log: Log }): Promise<AccuracyReport> {
  const { quick, log } = options;
  const config = quick ? QUICK : FULL;
  const timing = { budgetMs: config.budgetMs, batches: config.batches };
  log('# prediction against tensorcomm: calibrate from two sizes, then predict other sizes and ops');
  const links = await calibrateLinks(
    { intra: 'processes', sizes: config.calibration, rounds: config.batches, budgetMs: config.budgetMs },
    log,
  );
  for (const line of fitLines(links, config.calibration, config.batches)) log(line);
  const topology = loadTopology(calibratedSpec(links[0].fit, links[1].fit, RANKS_PER_NODE));
  const rows: AccuracyRow[] = [];
  for (const backend of BACKENDS) {
    log(`# timing ${BACKEND_LABELS[backend]}`);
    const ranks = backend === 'nodes' ? [0, RANKS_PER_NODE] : [0, 1];
    for (const call of await measureBackend(backend, { ops: OPS, sizes: config.sizes, ...timing })) {
      const predictedUs = predictCollective({
        op: MODEL_OPS[call.op],
        bytes: call.bytes,
        ranks,
        topology,
      }).us;
      rows.push({
        backend,
        op: call.op,
        bytes: call.bytes,
        measuredUs: call.us,
        predictedUs,
        error: predictedUs / call.us - 1,
      });
    }
  }
  log(
    `# measured: median of ${config.batches} batches on rank 0 (sendRecv one way = rtt / 2); predicted: the calibrated topology`,
  );
  for (const line of formatTable(COLUMNS, rows)) log(line);
  for (const backend of BACKENDS) {
    log(summaryLine(BACKEND_LABELS[backend], summary(rows.filter((r) => r.backend === backend))));
  }
  const judged = summary(rows);
  log(summaryLine('all', judged));
  const met = judged.median <= ACCURACY_GOAL;
  log(
    `# goal: median |error| <= ${ACCURACY_GOAL * 100}% from 1 MiB: ${(judged.median * 100).toFixed(1)}% -> ` +
      `${quick ? 'not judged with --quick' : met ? 'met' : 'NOT met'}`,
  );
  log('');
  return {
    links: links.map((l) => ({ link: l.link, backend: l.backend, ...l.fit })),
    rows,
    judged,
    goal: { median: judged.median, met },
  };
}

export interface PredictBenchReport {
  quick: boolean;
  accuracy: AccuracyReport;
  cost: CostReport;
}

export const main = benchMain(
  'bench/predict',
  async ({ quick, log }): Promise<PredictBenchReport> => ({
    quick,
    accuracy: await runPredictAccuracy({ quick, log }),
    cost: await runPredictCost({ quick, log }),
  }),
);

if (isMainModule(import.meta.url)) await main();
