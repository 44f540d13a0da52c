/**
 * Small calls as a user's job meets them (issue 42): thread ranks' calls
 * timed from a fresh job's first call on, in spans — the first 1,000 calls
 * and calls 1,001-10,000 (cold), and a span far into the job (warm) — with
 * Open MPI making the same calls from its own start in the same run: 2-rank
 * 4 B round trips and allReduces, and the 1 KiB allReduce of more ranks than
 * cores in the short jobs issue 18's goals name (1,200 / 600 / 60 calls at
 * 4 / 8 / 64 ranks). Every job is a fresh process; each tensorcomm job is
 * paired with the Open MPI job run right after it, and a span's ratio is the
 * median of the pairs' ratios (the 2-core machine switches between a fast
 * and a slow mode; figures taken seconds apart compare, figures from
 * different minutes may not). Beside them, the same job with V8's optimizing
 * compiler off (`--no-opt`): what a cold span costs without TurboFan
 * compiling the call path in every rank thread, which is most of a fresh
 * job's first few thousand calls (and what the warm span owes it). And for
 * the 2-rank round trip, Node's own floor measured the same way: a bare
 * SharedArrayBuffer ping-pong between 2 new threads (bench/floors/).
 *
 *   npx tsx bench/cold-calls.ts [--quick] [--json <file>]
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { median } from '../src/cli/bench/median.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import type { ColdCallsArgs } from './cold-calls-rank.ts';
import { type Column, fixed, formatTable } from './table.ts';

const exec = promisify(execFile);
const JOB_TIMEOUT_MS = 10 * 60_000;

/** A goal for a span: an absolute mean, or a ratio to Open MPI's. */
export type SpanGoal = { maxUs: number } | { maxRatio: number };

/** Calls `from + 1` to `to` of a job (counted from 1), their mean the span's figure. */
export interface Span {
  from: number;
  to: number;
  warm?: boolean;
  goals?: SpanGoal[];
}

export interface ColdCase {
  ranks: number;
  op: ColdCallsArgs['op'];
  bytes: number;
  spans: Span[];
}

/** The spans every cold bench reports: a job's first 1,000 calls and the next 9,000 (cold), and far in (warm). */
export const FIRST = { from: 0, to: 1_000 };
export const AFTER_FIRST = { from: 1_000, to: 10_000 };
/** Far enough in that Node 20's TurboFan has compiled the call path (it takes ~10,000 calls). */
export const WARM = { from: 15_000, to: 25_000, warm: true };
const oversubscribed = (ranks: number, shortJob: number, maxRatio: number, spans: Span[]): ColdCase => ({
  ranks,
  op: 'allReduce',
  bytes: 1024,
  spans: [{ from: 0, to: shortJob, goals: [{ maxRatio }] }, ...spans],
});

/** Issue 18's goal for warm 4 B calls between 2 ranks, kept by issue 42. */
const WARM_GOAL = { maxRatio: 5 };

/** The rows, with issue 42's goals on the spans they judge (the round trip's first 3,000: 5 us, moonshot 10x Open MPI). */
export const COLD_CASES: readonly ColdCase[] = [
  {
    ranks: 2,
    op: 'roundTrip',
    bytes: 4,
    spans: [
      FIRST,
      AFTER_FIRST,
      { from: 0, to: 3_000, goals: [{ maxUs: 5 }, { maxRatio: 10 }] },
      { ...WARM, goals: [WARM_GOAL] },
    ],
  },
  { ranks: 2, op: 'allReduce', bytes: 4, spans: [FIRST, AFTER_FIRST, { ...WARM, goals: [WARM_GOAL] }] },
  oversubscribed(4, 1_200, 3, [FIRST, AFTER_FIRST]),
  oversubscribed(8, 600, 3, [FIRST, AFTER_FIRST]),
  // 10,000 calls of 64 ranks on 2 cores take tens of seconds a job, tensorcomm's and Open MPI's alike.
  oversubscribed(64, 60, 2, [FIRST]),
];

/** The call counts a job reads the clock at: every span's ends, ascending. */
export function clockCounts(spans: readonly Span[]): number[] {
  const ends = new Set(spans.flatMap((s) => [s.from, s.to]).filter((count) => count > 0));
  return [...ends].sort((a, b) => a - b);
}

/** A span's mean µs a call, from a job's milliseconds at `counts` (clockCounts'). */
export function spanMeanUs(counts: readonly number[], ms: readonly number[], span: Span): number {
  const at = (count: number) => (count === 0 ? 0 : ms[counts.indexOf(count)]);
  return ((at(span.to) - at(span.from)) * 1000) / (span.to - span.from);
}

export interface SpanFigures {
  ranks: number;
  op: ColdCase['op'];
  bytes: number;
  span: Span;
  /** The median over jobs, µs a call. */
  tensorcommUs: number;
  /** The same with V8's optimizing compiler off (`--no-opt`), where measured. */
  noTurbofanUs?: number;
  /** Node's own floor over the span (bench/floors/sab_cold_calls.mjs), for the 2-rank round trip. */
  floorUs?: number;
  mpiUs?: number;
  /** The median of the paired jobs' ratios. */
  ratio?: number;
}

export interface ColdCallsReport {
  node: string;
  jobs: number;
  spans: SpanFigures[];
  /** Why Open MPI's figures are missing. */
  skipped?: string;
}

/** An anchor's span: the median over its jobs, and the median of job-by-job ratios (ours / the anchor's). */
export function besideAnchor(
  oursUs: readonly number[],
  theirsUs: readonly number[],
): { us: number; x: number } {
  return { us: median(theirsUs), x: median(oursUs.map((us, job) => us / theirsUs[job])) };
}

/** Per span, the median over jobs of ours, Open MPI's and the references' (no TurboFan, Node's floor), and of our and Open MPI's pairs' ratios. */
export function summarize(
  theCase: ColdCase,
  ours: readonly number[][],
  mpi: readonly number[][] | undefined,
  noTurbofan: readonly number[][] = [],
  floor: readonly number[][] = [],
) {
  const counts = clockCounts(theCase.spans);
  return theCase.spans.map((span): SpanFigures => {
    /** Each job's mean over the span. */
    const spanUs = (jobs: readonly number[][]) => jobs.map((ms) => spanMeanUs(counts, ms, span));
    const oursUs = spanUs(ours);
    const noTurbofanUs = spanUs(noTurbofan);
    const floorUs = spanUs(floor);
    const anchor = mpi && besideAnchor(oursUs, spanUs(mpi));
    return {
      ranks: theCase.ranks,
      op: theCase.op,
      bytes: theCase.bytes,
      span,
      tensorcommUs: median(oursUs),
      ...(noTurbofanUs.length > 0 && { noTurbofanUs: median(noTurbofanUs) }),
      ...(floorUs.length > 0 && { floorUs: median(floorUs) }),
      mpiUs: anchor?.us,
      ratio: anchor?.x,
    };
  });
}

/** The span's goals and whether each holds, e.g. `<=5us:MISSED`; a ratio goal without Open MPI's figure is left out. */
export function verdicts(figures: SpanFigures): string[] {
  const judged = (goal: string, met: boolean) => `${goal}:${met ? 'met' : 'MISSED'}`;
  return (figures.span.goals ?? []).flatMap((goal) => {
    if ('maxUs' in goal) return [judged(`<=${goal.maxUs}us`, figures.tensorcommUs <= goal.maxUs)];
    return figures.ratio === undefined ? [] : [judged(`<=${goal.maxRatio}x`, figures.ratio <= goal.maxRatio)];
  });
}

const count = (n: number) => n.toLocaleString('en-US');
export const spanText = (span: Span) =>
  `${count(span.from + 1)}-${count(span.to)}(${span.warm ? 'warm' : 'cold'})`;

const COLUMNS: Column<SpanFigures>[] = [
  { title: 'ranks', width: 6, cell: (f) => String(f.ranks) },
  { title: 'op', width: 10, cell: (f) => f.op },
  { title: 'size(B)', width: 8, cell: (f) => String(f.bytes) },
  { title: 'calls', width: 22, cell: (f) => spanText(f.span) },
  { title: 'tensorcomm(us)', width: 15, cell: (f) => fixed(f.tensorcommUs) },
  { title: 'no-TurboFan(us)', width: 16, cell: (f) => fixed(f.noTurbofanUs) },
  { title: 'node-floor(us)', width: 15, cell: (f) => fixed(f.floorUs) },
  { title: 'openmpi(us)', width: 12, cell: (f) => fixed(f.mpiUs) },
  { title: 'ratio', width: 9, cell: (f) => (f.ratio === undefined ? '-' : `${fixed(f.ratio, 1)}x`) },
  { title: 'goal', width: 26, cell: (f) => verdicts(f).join(',') },
];

/** One fresh tensorcomm job of `theCase`, its Node process given `v8Flags`: rank 0's clock readings. */
async function tensorcommJob(theCase: ColdCase, v8Flags: readonly string[] = []): Promise<number[]> {
  const args: ColdCallsArgs = {
    op: theCase.op,
    elements: theCase.bytes / 4,
    counts: clockCounts(theCase.spans),
  };
  const script = fileURLToPath(new URL('./cold-calls-job.ts', import.meta.url));
  const { stdout } = await exec(
    process.execPath,
    [...v8Flags, '--import', 'tsx', script, String(theCase.ranks), JSON.stringify(args)],
    { timeout: JOB_TIMEOUT_MS },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as number[];
}

/** Whether Node's own floor (floorJob) makes the case's calls: the 2-rank round trip. */
const hasFloor = (theCase: ColdCase) => theCase.op === 'roundTrip' && theCase.ranks === 2;

/** Node's own floor in a fresh process (bench/floors/sab_cold_calls.mjs): its clock readings at `counts`. */
async function floorJob(counts: readonly number[]): Promise<number[]> {
  const script = fileURLToPath(new URL('./floors/sab_cold_calls.mjs', import.meta.url));
  const { stdout } = await exec(process.execPath, [script, ...counts.map(String)], {
    timeout: JOB_TIMEOUT_MS,
  });
  return clockReadings(stdout);
}

/**
 * Open MPI's fresh jobs (bench/floors/mpi_cold_calls.c, compiled into `dir` at the first): `ranks`
 * processes make `op` of `bytes` and read the clock at `counts`; `mpirunArgs` go before `-np` (e.g.
 * a transport). ENOENT without Open MPI.
 */
export function mpiColdJobs(
  dir: string,
): (
  op: ColdCase['op'],
  ranks: number,
  bytes: number,
  counts: readonly number[],
  mpirunArgs?: string[],
) => Promise<number[]> {
  const binary = join(dir, 'mpi_cold_calls');
  let compiled: Promise<unknown> | undefined;
  return async (op, ranks, bytes, counts, mpirunArgs = []) => {
    const source = fileURLToPath(new URL('./floors/mpi_cold_calls.c', import.meta.url));
    compiled ??= exec('mpicc', ['-O2', '-o', binary, source], { timeout: 60_000 });
    await compiled;
    const mpirun = ['--allow-run-as-root', '--oversubscribe', ...mpirunArgs, '-np', String(ranks), binary];
    const args = [...mpirun, op === 'roundTrip' ? 'rtt' : 'allreduce', String(bytes), ...counts.map(String)];
    const { stdout } = await exec('mpirun', args, { timeout: JOB_TIMEOUT_MS });
    return clockReadings(stdout);
  };
}

/** An anchor job's clock readings: the `{ ms }` of the last line it printed. */
export function clockReadings(stdout: string): number[] {
  return (JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as { ms: number[] }).ms;
}

/** Why a cold anchor could not run, as a line for the report. */
export function anchorSkipped(anchor: 'gloo' | 'mpi', error: unknown): string {
  const { code, message } = error as { code?: string; message: string };
  if (code === 'ENOENT') {
    return anchor === 'gloo'
      ? 'python3 not found; apt-get install -y python3-torch'
      : 'Open MPI not installed; apt-get install -y openmpi-bin libopenmpi-dev';
  }
  if (anchor === 'gloo' && /No module named 'torch'/.test(message)) {
    return 'python3-torch not installed; apt-get install -y python3-torch';
  }
  return `failed: ${message.split('\n')[0]}`;
}

export async function runColdCallsBench(
  options: { quick?: boolean; log?: Log; cases?: readonly ColdCase[]; jobs?: number } = {},
): Promise<ColdCallsReport> {
  const log = options.log ?? console.log;
  const cases = options.cases ?? (options.quick ? COLD_CASES.filter((c) => c.ranks < 64) : COLD_CASES);
  const jobs = options.jobs ?? (options.quick ? 1 : 3);
  const dir = await mkdtemp(join(tmpdir(), 'tensorcomm-cold-calls-'));
  const ours: number[][][] = cases.map(() => []);
  const noTurbofan: number[][][] = cases.map(() => []);
  const floor: number[][][] = cases.map(() => []);
  const mpi: number[][][] = cases.map(() => []);
  let skipped: string | undefined;
  try {
    const mpiJob = mpiColdJobs(dir);
    for (let job = 0; job < jobs; job++) {
      for (const [i, theCase] of cases.entries()) {
        const counts = clockCounts(theCase.spans);
        ours[i].push(await tensorcommJob(theCase));
        noTurbofan[i].push(await tensorcommJob(theCase, ['--no-opt']));
        if (hasFloor(theCase)) floor[i].push(await floorJob(counts));
        if (skipped !== undefined) continue;
        try {
          mpi[i].push(await mpiJob(theCase.op, theCase.ranks, theCase.bytes, counts));
        } catch (error) {
          skipped = anchorSkipped('mpi', error);
        }
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const spans = cases.flatMap((c, i) =>
    summarize(c, ours[i], skipped === undefined ? mpi[i] : undefined, noTurbofan[i], floor[i]),
  );
  log(
    `# cold vs warm: thread ranks' small calls from a fresh job's first call (Node ${process.version}, ` +
      `${availableParallelism()} cores), Open MPI the same calls from its start in the same run; ` +
      `mean us a call over the span, median of ${jobs} job${jobs === 1 ? '' : 's'} each, ratio the median of the pairs'; ` +
      "no-TurboFan: the same jobs with V8's optimizing compiler off (node --no-opt), a reference, not a setting; " +
      'node-floor: 2 new threads round-tripping over a SharedArrayBuffer with an awaited async send and receive (bench/floors/sab_cold_calls.mjs)',
  );
  if (skipped !== undefined) log(`# Open MPI: skipped (${skipped})`);
  for (const line of formatTable(COLUMNS, spans)) log(line);
  return { node: process.version, jobs, spans, skipped };
}

export const main = benchMain('bench/cold-calls', runColdCallsBench);

if (isMainModule(import.meta.url)) await main();
