/**
 * Collective latency and bandwidth between rank threads, printed as
 * nccl-tests tables, plus the zero-copy destGet next to a plain copy.
 * `npx tensorcomm bench` and bench/collectives.ts both run this.
 *
 * algbw = bytes / time and busbw = algbw × factor, with nccl-tests' factors,
 * so figures compare with nccl-tests, gloo and MPI runs (1 GB = 1e9 B).
 */
import { busFactor } from '../../debug/bus-factor.ts';
import type { DebugOptions } from '../../debug/options.ts';
import { launchProcesses, spawnThreads } from '../../index.ts';
import {
  COLLECTIVE_OPS,
  type CollectiveOp,
  type RankArgs,
  type RankResult,
  type ZeroCopySample,
} from './collectives-rank.ts';
import { type Column, fixed, formatTable } from './table.ts';

export { busFactor, COLLECTIVE_OPS, type CollectiveOp, type ZeroCopySample };

export type Log = (line: string) => void;

export interface CollectiveRow {
  op: CollectiveOp;
  worldSize: number;
  bytes: number;
  count: number;
  type: 'float32';
  /** Per operation; for sendRecv the one-way time, half the round trip. */
  timeUs: number;
  /** sendRecv only: the measured round trip. */
  rttUs?: number;
  algbw: number;
  busbw: number;
  itersPerBatch: number;
  batches: number;
}

export const BENCH_STORES = ['memory', 'file'] as const;
export type BenchStore = (typeof BENCH_STORES)[number];

export interface CollectivesOptions {
  quick?: boolean;
  ops?: readonly CollectiveOp[];
  worldSizes?: readonly number[];
  /** Measure the zero-copy destGet (default true; needs a world size of at least 2). */
  zeroCopy?: boolean;
  /** Message sizes in bytes (default: 4 B to 64 MiB in ×4 steps; quick: four sizes up to 1 MiB). */
  sizes?: readonly number[];
  /** memory: ranks as threads over MemoryTensorStore (default); file: ranks as processes over FileTensorStore. */
  store?: BenchStore;
  /** Debugging options of the bench's jobs (e.g. `{ checks: false }` to measure what the checks cost). */
  debug?: DebugOptions;
  log?: Log;
}

export interface CollectivesReport {
  quick: boolean;
  rows: CollectiveRow[];
  zeroCopy: ZeroCopySample[];
}

/** The rank entry beside this file: .ts from source, .js once built. */
const RANK_ENTRY = new URL(
  `./collectives-rank${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
  import.meta.url,
);

const KiB = 1024;
const MiB = 1024 * KiB;

/** 4 B to 64 MiB in ×4 steps: they include the sizes the gloo and MPI anchors measure. */
const FULL_SIZES = Array.from({ length: 13 }, (_, i) => 4 * 4 ** i);

const FULL = {
  sizes: FULL_SIZES,
  budgetMs: 200,
  batches: 5,
  zeroCopy: { sizes: [4 * KiB, MiB, 64 * MiB], rounds: 21 },
};
const QUICK = {
  sizes: [4, KiB, 64 * KiB, MiB],
  budgetMs: 20,
  batches: 3,
  zeroCopy: { sizes: [4 * KiB, 64 * MiB], rounds: 5 },
};

const DESCRIPTIONS: Record<CollectiveOp, string> = {
  allReduce: 'allReduce (in-place sum), busbw = algbw × 2(n-1)/n',
  allGather: 'allGather (outputs[], input), size = gathered bytes, busbw = algbw × (n-1)/n',
  reduceScatter: 'reduceScatterTensor (sum), size = input bytes, busbw = algbw × (n-1)/n',
  broadcast: 'broadcast from rank 0, busbw = algbw',
  allToAll: 'allToAllSingle, size = bytes each rank sends, busbw = algbw × (n-1)/n',
  sendRecv: 'send/recv ping-pong in pairs (0<->1, 2<->3), time = one way = rtt / 2, busbw = algbw',
};

const BASE_COLUMNS: readonly Column<CollectiveRow>[] = [
  { title: 'size(B)', width: 12, cell: (r) => String(r.bytes) },
  { title: 'count', width: 12, cell: (r) => String(r.count) },
  { title: 'type', width: 9, cell: (r) => r.type },
  { title: 'time(us)', width: 12, cell: (r) => fixed(r.timeUs) },
  { title: 'algbw(GB/s)', width: 13, cell: (r) => fixed(r.algbw) },
  { title: 'busbw(GB/s)', width: 13, cell: (r) => fixed(r.busbw) },
];
const SEND_RECV_COLUMNS: readonly Column<CollectiveRow>[] = [
  ...BASE_COLUMNS,
  { title: 'rtt(us)', width: 12, cell: (r) => fixed(r.rttUs) },
];

const ZERO_COPY_COLUMNS: readonly Column<ZeroCopySample>[] = [
  { title: 'size(B)', width: 12, cell: (r) => String(r.bytes) },
  { title: 'destGet(us)', width: 13, cell: (r) => fixed(r.destGetUs) },
  { title: 'set copy(us)', width: 14, cell: (r) => fixed(r.copyUs) },
  { title: 'copy/destGet', width: 14, cell: (r) => fixed(r.copyUs / r.destGetUs, 1) },
];

export function printCollectiveTable(rows: readonly CollectiveRow[], log: Log): void {
  const [first] = rows;
  if (!first) return;
  const columns = first.op === 'sendRecv' ? SEND_RECV_COLUMNS : BASE_COLUMNS;
  log(`# ${DESCRIPTIONS[first.op]}`);
  log(
    `# float32, ${first.worldSize} ranks; median over ${first.batches} batches, timed on rank 0 after a barrier`,
  );
  for (const line of formatTable(columns, rows)) log(line);
  log('');
}

export function printZeroCopyTable(samples: readonly ZeroCopySample[], log: Log): void {
  if (samples.length === 0) return;
  log(
    '# zero-copy destGet, rank 0 -> rank 1: a view on the producer’s memory, next to a TypedArray.set copy of it',
  );
  for (const line of formatTable(ZERO_COPY_COLUMNS, samples)) log(line);
  log('');
}

function toRow(sample: RankResult['samples'][number], worldSize: number): CollectiveRow {
  const oneWay = sample.op === 'sendRecv';
  const timeUs = oneWay ? sample.us / 2 : sample.us;
  const algbw = sample.bytes / timeUs / 1e3;
  return {
    op: sample.op,
    worldSize,
    bytes: sample.bytes,
    count: sample.count,
    type: 'float32',
    timeUs,
    rttUs: oneWay ? sample.us : undefined,
    algbw,
    busbw: algbw * busFactor(sample.op, worldSize),
    itersPerBatch: sample.itersPerBatch,
    batches: sample.batches,
  };
}

/**
 * One job per world size runs every op at every size (thread start-up would
 * otherwise dominate the quick run); tables are printed as each job ends.
 */
export async function runCollectivesBench(options: CollectivesOptions = {}): Promise<CollectivesReport> {
  const quick = options.quick ?? false;
  const log = options.log ?? console.log;
  const config = quick ? QUICK : FULL;
  const ops = [...(options.ops ?? COLLECTIVE_OPS)];
  const worldSizes = options.worldSizes ?? [2, 4];
  const report: CollectivesReport = { quick, rows: [], zeroCopy: [] };
  // The zero-copy figure is rank 0 -> rank 1, so it rides along with the smallest job that has both.
  const zeroCopyWorld = options.zeroCopy === false ? undefined : worldSizes.find((n) => n >= 2);
  for (const worldSize of worldSizes) {
    const args: RankArgs = {
      ops,
      sizes: [...(options.sizes ?? config.sizes)],
      budgetMs: config.budgetMs,
      batches: config.batches,
      zeroCopy: worldSize === zeroCopyWorld ? config.zeroCopy : undefined,
    };
    // A stuck collective should fail the bench with a message, not hang it.
    const job = { args, debug: options.debug, collectiveTimeoutMs: 120_000 };
    if (options.store === 'file') log(`# ${worldSize} ranks as processes over FileTensorStore`);
    const results =
      options.store === 'file'
        ? await launchProcesses<RankResult>(RANK_ENTRY, { nproc: worldSize, ...job })
        : await spawnThreads<RankResult>(RANK_ENTRY, { worldSize, ...job });
    const rows = results[0].samples.map((s) => toRow(s, worldSize));
    for (const op of ops)
      printCollectiveTable(
        rows.filter((r) => r.op === op),
        log,
      );
    report.rows.push(...rows);
    if (worldSize === zeroCopyWorld) {
      report.zeroCopy = results[1].zeroCopy;
      printZeroCopyTable(report.zeroCopy, log);
    }
  }
  return report;
}
