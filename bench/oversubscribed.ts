/**
 * More thread ranks than cores: 1 KiB allReduce (256 float32) at 4, 8 and 64
 * rank threads, beside Open MPI's MPI_Allreduce of the same size with as
 * many processes (`mpirun --oversubscribe`) from the same run. Each figure
 * is the median of several repeats (a repeat: the mean over a loop of calls);
 * the ratio is tensorcomm's median over Open MPI's.
 *
 *   npx tsx bench/oversubscribed.ts [--quick] [--json <file>]
 */
import { availableParallelism } from 'node:os';
import { spawnThreads } from '../src/index.ts';
import { mpiOversubscribed } from './anchors.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import type { OversubscribedRankArgs } from './oversubscribed-rank.ts';
import { type Column, fixed, formatTable } from './table.ts';

export interface OversubscribedRow {
  ranks: number;
  tensorcommUs: number;
  mpiUs?: number;
  /** Issue 18's goal for this row: at most this many times Open MPI. */
  goal: number;
}

const ELEMENTS = 256;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const ratio = (row: OversubscribedRow) => (row.mpiUs ? row.tensorcommUs / row.mpiUs : undefined);

const COLUMNS: Column<OversubscribedRow>[] = [
  { title: 'ranks', width: 7, cell: (r) => String(r.ranks) },
  { title: 'size(B)', width: 9, cell: () => String(ELEMENTS * 4) },
  { title: 'tensorcomm(us)', width: 16, cell: (r) => fixed(r.tensorcommUs, 1) },
  { title: 'openmpi(us)', width: 13, cell: (r) => (r.mpiUs === undefined ? '-' : fixed(r.mpiUs, 1)) },
  { title: 'ratio', width: 8, cell: (r) => (ratio(r) === undefined ? '-' : `${fixed(ratio(r), 1)}x`) },
  { title: 'goal', width: 6, cell: (r) => `${r.goal}x` },
];

export async function runOversubscribedBench(
  options: { quick?: boolean; log?: Log; worldSizes?: readonly number[] } = {},
): Promise<OversubscribedRow[]> {
  const log = options.log ?? console.log;
  const worldSizes = options.worldSizes ?? (options.quick ? [4, 8] : [4, 8, 64]);
  const repeats = options.quick ? 3 : 7;
  const mpi = await mpiOversubscribed(worldSizes, repeats);
  const rows: OversubscribedRow[] = [];
  for (const ranks of worldSizes) {
    // A loop of about a second per repeat at the figures: fewer calls where a call costs more.
    const iterations = ranks >= 64 ? 100 : options.quick ? 200 : 1000;
    const args: OversubscribedRankArgs = { elements: ELEMENTS, warmup: iterations / 4, iterations, repeats };
    const means = await spawnThreads<number[]>(new URL('./oversubscribed-rank.ts', import.meta.url), {
      worldSize: ranks,
      args,
      timeoutMs: 900_000,
    });
    rows.push({
      ranks,
      tensorcommUs: median(means[0]),
      mpiUs: 'us' in mpi ? median(mpi.us[ranks]) : undefined,
      goal: ranks >= 64 ? 2 : 3,
    });
  }
  log(
    `# 1 KiB allReduce, more ranks than cores (${availableParallelism()} cores): thread ranks vs Open MPI ` +
      `--oversubscribe, median of ${repeats} repeats${options.quick ? ' (--quick)' : ''}`,
  );
  if ('skipped' in mpi) log(`# Open MPI: skipped (${mpi.skipped})`);
  for (const line of formatTable(COLUMNS, rows)) log(line);
  return rows;
}

export const main = benchMain('bench/oversubscribed', runOversubscribedBench);

if (isMainModule(import.meta.url)) await main();
