/**
 * Weight sync from 2 trainer ranks to 2 rollout ranks, as threads and then
 * as processes: time per sync and effective bandwidth of WeightSyncEngine
 * with 1 and 2 senders, beside the naive way measured in the same run (rank 0
 * broadcasts each tensor on its own to the rollouts).
 *
 *   npx tsx bench/weight-sync.ts [--quick] [--json <file>]
 *   npx tsx bench/weight-sync.ts --nodes [--quick] [--json <file>]
 *
 * --nodes: across two nodes over loopback instead, 1 trainer to 1, 2 and 3
 * rollouts on the other node beside a plain TCP copy (weight-sync-nodes.ts).
 *
 * GB/s = model bytes / time per sync (1 GB = 1e9 B): the rate at which every
 * rollout gets the whole model.
 */
import { availableParallelism } from 'node:os';
import { launchProcesses, spawnThreads } from '../src/index.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { fixed, formatTable } from './table.ts';
import { runWeightSyncNodesBench } from './weight-sync-nodes.ts';
import {
  type ModelSpec,
  modelLayout,
  type RankArgs,
  type RankResult,
  type SyncMode,
} from './weight-sync-rank.ts';

const MiB = 1 << 20;

/** ~1 GiB in ~1 800 tensors (full) and ~64 MiB in ~240 (quick), mostly 0.5 MiB experts. */
const FULL: RankArgs = {
  model: { layers: 21, hidden: 1024, experts: 40, expertHidden: 256 },
  bucketBytes: 64 * MiB,
  reps: 5,
};
const QUICK: RankArgs = {
  model: { layers: 6, hidden: 512, experts: 16, expertHidden: 256 },
  bucketBytes: 16 * MiB,
  reps: 3,
};

export interface WeightSyncRow {
  mode: SyncMode;
  ms: number;
  gbps: number;
  speedup: number;
  exact: boolean;
}

export interface WeightSyncReport {
  quick: boolean;
  model: ModelSpec;
  tensors: number;
  bytes: number;
  bucketBytes: number;
  rows: WeightSyncRow[];
  /** The same syncs with the four ranks as processes. */
  processRows: WeightSyncRow[];
}

export async function runWeightSyncBench(
  options: { quick?: boolean; log?: Log } = {},
): Promise<WeightSyncReport> {
  const quick = options.quick ?? false;
  const log = options.log ?? console.log;
  const args = quick ? QUICK : FULL;
  const entry = new URL('./weight-sync-rank.ts', import.meta.url);
  const job = { args, collectiveTimeoutMs: 120_000 };
  const threads = await spawnThreads<RankResult>(entry, { worldSize: 4, ...job });
  const { tensors, bytes } = threads[0];
  const dtypes = [...new Set(modelLayout(args.model).map(([, d]) => d))].join(', ');
  const model = `${tensors} tensors (${dtypes}), ${(bytes / MiB).toFixed(0)} MiB, buckets of ${args.bucketBytes / MiB} MiB`;
  log(
    `# median of ${args.reps} syncs after a warm-up; naive = one broadcast per tensor from rank 0; engine rows load into the model (borrow + copy_), 'owned' keeps the yielded tensors`,
  );
  log(
    `# copy floor = each rollout copies a model's worth between tensors of its own, no messages: the least any sync into the model costs here`,
  );
  log(`# weight sync, 2 trainers -> 2 rollouts (threads, ${availableParallelism()} cores): ${model}`);
  const rows = tabulate(threads, bytes, log);
  // Processes pay per message what threads do not (files, wake-ups): where bucketing is meant to win.
  const processes = await launchProcesses<RankResult>(entry, { nproc: 4, ...job });
  log(`# the same as 4 processes (FileTensorStore)`);
  const processRows = tabulate(processes, bytes, log);
  return { quick, model: args.model, tensors, bytes, bucketBytes: args.bucketBytes, rows, processRows };
}

function tabulate(results: RankResult[], bytes: number, log: Log): WeightSyncRow[] {
  const naive = results[0].samples.find((s) => s.mode === 'naive')!;
  const rows = results[0].samples.map((s) => ({
    mode: s.mode,
    ms: s.ms,
    gbps: bytes / s.ms / 1e6,
    speedup: naive.ms / s.ms,
    // Exact only if both rollouts hold the trainers' weights.
    exact: results.every((r) => r.samples.find((x) => x.mode === s.mode)!.exact),
  }));
  const columns = [
    { title: 'mode', width: 18, cell: (r: WeightSyncRow) => r.mode },
    { title: 'time(ms)', width: 11, cell: (r: WeightSyncRow) => fixed(r.ms, 1) },
    { title: 'GB/s', width: 8, cell: (r: WeightSyncRow) => fixed(r.gbps) },
    { title: 'vs-naive', width: 10, cell: (r: WeightSyncRow) => `${fixed(r.speedup)}x` },
    { title: 'exact', width: 7, cell: (r: WeightSyncRow) => (r.exact ? 'yes' : 'NO') },
  ];
  for (const line of formatTable(columns, rows)) log(line);
  log('');
  return rows;
}

export const main = benchMain('bench/weight-sync', runWeightSyncBench);
const nodesMain = benchMain('bench/weight-sync --nodes', runWeightSyncNodesBench);

if (isMainModule(import.meta.url)) {
  const argv = process.argv.slice(2);
  // --nodes is this script's own flag: the shared ones are parsed as every bench parses them.
  if (argv.includes('--nodes')) await nodesMain(argv.filter((a) => a !== '--nodes'));
  else await main(argv);
}
