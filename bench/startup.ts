/**
 * Start-up of thread ranks beside its floor from the same run: N bare
 * `new Worker` threads that import nothing (../shared/anchors/worker_start_floor.mjs)
 * against spawnThreads → one barrier → resolved, for .mjs and .ts entries; and
 * a job on warm pooled threads (RankThreadPool, what rankTest runs on). Each
 * measurement runs in a fresh process (bench/startup-job.ts), floor and
 * tensorcomm interleaved, medians of the repeats.
 *
 *   npx tsx bench/startup.ts [--quick] [--json <file>]
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { median } from '../src/cli/bench/median.ts';
import { fixed, formatTable } from '../src/cli/bench/table.ts';
import { ANCHORS_DIR } from './anchors.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import type { StartupJobResult } from './startup-job.ts';

const exec = promisify(execFile);

/** Goals of issue 18, as multiples of the floor. */
export const STARTUP_GOALS = { cold: 1.5, warm: 0.2, peakRssBytes: 2 ** 30 } as const;
const WORLD_SIZES = [4, 64] as const;
const ENTRIES = ['startup-rank.mjs', 'startup-rank.ts'] as const;
const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const JOB_TIMEOUT_MS = 600_000;

export interface StartupRow {
  worldSize: number;
  entry: string;
  floorMs: number;
  /** Medians over the repeats: the first job of a fresh process, a second on new threads, one on warm threads. */
  firstMs: number;
  coldMs: number;
  warmMs: number;
  peakRssBytes: number;
}

async function floorMs(worldSize: number): Promise<number> {
  const { stdout } = await exec(process.execPath, [
    join(ANCHORS_DIR, 'worker_start_floor.mjs'),
    `${worldSize}`,
  ]);
  return (JSON.parse(stdout.trim()) as { ms: number }).ms;
}

async function job(entry: string, worldSize: number, warmRepeats: number): Promise<StartupJobResult> {
  const { stdout } = await exec(
    process.execPath,
    [
      '--import',
      'tsx',
      join(BENCH_DIR, 'startup-job.ts'),
      join(BENCH_DIR, entry),
      `${worldSize}`,
      `${warmRepeats}`,
    ],
    { timeout: JOB_TIMEOUT_MS, maxBuffer: 1 << 20 },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as StartupJobResult;
}

async function measure(entry: string, worldSize: number, repeats: number): Promise<StartupRow> {
  const floors: number[] = [];
  const jobs: StartupJobResult[] = [];
  for (let i = 0; i < repeats; i++) {
    floors.push(await floorMs(worldSize));
    jobs.push(await job(entry, worldSize, repeats));
  }
  return {
    worldSize,
    entry: entry.slice(entry.lastIndexOf('.')),
    floorMs: median(floors),
    firstMs: median(jobs.map((j) => j.firstMs)),
    coldMs: median(jobs.map((j) => j.coldMs)),
    warmMs: median(jobs.flatMap((j) => j.warmMs)),
    peakRssBytes: Math.max(...jobs.map((j) => j.peakRssBytes)),
  };
}

export function printStartup(rows: readonly StartupRow[], log: Log): void {
  log(
    `# start-up: spawnThreads → barrier → resolved, beside N bare Workers (floor); goals: first/cold ≤ ${STARTUP_GOALS.cold}× floor, warm ≤ ${STARTUP_GOALS.warm}× floor`,
  );
  const ratio = (ms: number, row: StartupRow) => fixed(ms / row.floorMs, 2);
  const table = formatTable<StartupRow>(
    [
      { title: 'ranks', width: 6, cell: (r) => `${r.worldSize}` },
      { title: 'entry', width: 6, cell: (r) => r.entry },
      { title: 'floor(ms)', width: 10, cell: (r) => fixed(r.floorMs, 0) },
      { title: 'first(ms)', width: 10, cell: (r) => fixed(r.firstMs, 0) },
      { title: 'x', width: 6, cell: (r) => ratio(r.firstMs, r) },
      { title: 'cold(ms)', width: 10, cell: (r) => fixed(r.coldMs, 0) },
      { title: 'x', width: 6, cell: (r) => ratio(r.coldMs, r) },
      { title: 'warm(ms)', width: 10, cell: (r) => fixed(r.warmMs, 1) },
      { title: 'x', width: 6, cell: (r) => ratio(r.warmMs, r) },
      { title: 'peakRSS(MiB)', width: 13, cell: (r) => fixed(r.peakRssBytes / 2 ** 20, 0) },
    ],
    rows,
  );
  for (const line of table) log(line);
}

export async function runStartupBench({ quick, log }: { quick: boolean; log: Log }): Promise<StartupRow[]> {
  const repeats = quick ? 1 : 5;
  const rows: StartupRow[] = [];
  for (const worldSize of WORLD_SIZES) {
    for (const entry of ENTRIES) rows.push(await measure(entry, worldSize, repeats));
  }
  printStartup(rows, log);
  return rows;
}

export const main = benchMain('bench/startup', runStartupBench);

if (isMainModule(import.meta.url)) await main();
