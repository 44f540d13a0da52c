/**
 * Process ranks' small calls as a user's job meets them (issue 42): 4 B
 * round trips and allReduces between 2 rank processes of one machine
 * (launchProcesses: shared-memory rings), and 4 B allReduces between 2
 * "nodes" on loopback (distinct node ids: the network store), timed from a
 * fresh job's first call on in spans — the first 1,000 calls and calls
 * 1,001-10,000 (cold), the first 3,000 (the short job the goals name), and
 * a span far into the job (warm) — beside gloo (TCP, bench/floors/
 * gloo_cold_calls.py) and Open MPI (shared memory; across nodes TCP only:
 * bench/floors/mpi_cold_calls.c) making the same calls from their own start
 * in the same run. Each tensorcomm job is followed by gloo's and Open MPI's;
 * a span's ratio is the median of those jobs' ratios (the shared 2-core
 * machine's speed drifts from one minute to the next).
 *
 *   npx tsx bench/process-small-calls.ts [--quick] [--json <file>]
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { median } from '../src/cli/bench/median.ts';
import { launchProcesses } from '../src/index.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import {
  AFTER_FIRST,
  anchorSkipped,
  besideAnchor,
  clockCounts,
  clockReadings,
  FIRST,
  mpiColdJobs,
  type Span,
  spanMeanUs,
  spanText,
  WARM,
} from './cold-calls.ts';
import type { ColdCallsArgs } from './cold-calls-rank.ts';
import { runOnNodes } from './nodes.ts';
import { type Column, fixed, formatTable } from './table.ts';

const exec = promisify(execFile);
const JOB_TIMEOUT_MS = 10 * 60_000;
/** Debian's python holds python3-torch (see bench/anchors.ts). */
const PYTHON = '/usr/bin/python3';
const BYTES = 4;

type Layout = 'processes' | 'nodes';
type Anchor = 'gloo' | 'mpi';

/** A span judged against gloo: tensorcomm's mean at most `maxGloo` times gloo's. */
export interface ProcessSpan extends Span {
  maxGloo?: number;
}

export interface ProcessCase {
  layout: Layout;
  op: ColdCallsArgs['op'];
  spans: ProcessSpan[];
}

/** The rows, with issue 42's goals on the spans they judge. */
export const PROCESS_CASES: readonly ProcessCase[] = [
  {
    layout: 'processes',
    op: 'roundTrip',
    spans: [FIRST, AFTER_FIRST, { from: 0, to: 3_000, maxGloo: 0.5 }, WARM],
  },
  { layout: 'processes', op: 'allReduce', spans: [FIRST, AFTER_FIRST, WARM] },
  { layout: 'nodes', op: 'allReduce', spans: [FIRST, AFTER_FIRST, { from: 0, to: 3_000, maxGloo: 1 }, WARM] },
];

export interface ProcessSpanFigures {
  layout: Layout;
  op: ProcessCase['op'];
  span: ProcessSpan;
  /** Medians over jobs, µs a call. */
  tensorcommUs: number;
  glooUs?: number;
  mpiUs?: number;
  /** Medians of the paired jobs' ratios (tensorcomm / anchor). */
  xGloo?: number;
  xMpi?: number;
}

export interface ProcessSmallCallsReport {
  node: string;
  jobs: number;
  spans: ProcessSpanFigures[];
  /** Why an anchor's figures are missing. */
  skipped: Partial<Record<Anchor, string>>;
}

/** The per-span figures of one case from its jobs' clock readings (an anchor's list empty when it did not run). */
export function summarizeCase(
  theCase: ProcessCase,
  ours: readonly number[][],
  anchors: Record<Anchor, readonly number[][]>,
): ProcessSpanFigures[] {
  const counts = clockCounts(theCase.spans);
  return theCase.spans.map((span) => {
    const us = (jobs: readonly number[][]) => jobs.map((ms) => spanMeanUs(counts, ms, span));
    const oursUs = us(ours);
    const anchor = (name: Anchor) => {
      const theirs = us(anchors[name]);
      return theirs.length === oursUs.length ? besideAnchor(oursUs, theirs) : { us: undefined, x: undefined };
    };
    const gloo = anchor('gloo');
    const mpi = anchor('mpi');
    return {
      layout: theCase.layout,
      op: theCase.op,
      span,
      tensorcommUs: median(oursUs),
      glooUs: gloo.us,
      xGloo: gloo.x,
      mpiUs: mpi.us,
      xMpi: mpi.x,
    };
  });
}

/** Whether a span meets its goal; undefined without one (or without gloo to judge by). */
export function goalMet(figures: ProcessSpanFigures): boolean | undefined {
  const { maxGloo } = figures.span;
  return maxGloo === undefined || figures.xGloo === undefined ? undefined : figures.xGloo <= maxGloo;
}

const times = (x: number | undefined) => (x === undefined ? '-' : `${fixed(x)}x`);

const COLUMNS: Column<ProcessSpanFigures>[] = [
  { title: 'layout', width: 10, cell: (f) => f.layout },
  { title: 'op (4 B)', width: 10, cell: (f) => f.op },
  { title: 'calls', width: 20, cell: (f) => spanText(f.span) },
  { title: 'tensorcomm', width: 11, cell: (f) => fixed(f.tensorcommUs) },
  { title: 'gloo', width: 9, cell: (f) => fixed(f.glooUs) },
  { title: 'x gloo', width: 8, cell: (f) => times(f.xGloo) },
  { title: 'openmpi', width: 9, cell: (f) => fixed(f.mpiUs) },
  { title: 'x mpi', width: 9, cell: (f) => times(f.xMpi) },
  {
    title: 'goal',
    width: 18,
    cell: (f) => {
      const met = goalMet(f);
      return met === undefined ? '' : `<=${f.span.maxGloo}x gloo ${met ? 'met' : 'MISSED'}`;
    },
  },
];

/** One fresh tensorcomm job of the case; rank 0's clock readings. */
async function tensorcommJob(theCase: ProcessCase, args: ColdCallsArgs): Promise<number[]> {
  if (theCase.layout === 'processes') {
    const rank = new URL('./cold-calls-rank.ts', import.meta.url);
    const [at] = await launchProcesses<number[]>(rank, {
      nproc: 2,
      args,
      collectiveTimeoutMs: JOB_TIMEOUT_MS,
    });
    return at;
  }
  const out = await runOnNodes(2, 1, 'bench/cold-calls-node-rank.ts', [JSON.stringify(args)]);
  const line = /^cold-calls (.*)$/m.exec(out);
  if (!line) throw new Error(`rank 0 printed no clock readings: ${out}`);
  return JSON.parse(line[1]) as number[];
}

/** The anchors' jobs: gloo's script, and Open MPI's program compiled into `dir` at its first job. */
function anchorJobs(
  dir: string,
): Record<Anchor, (theCase: ProcessCase, counts: number[]) => Promise<number[]>> {
  const mpi = mpiColdJobs(dir);
  return {
    gloo: async (theCase, counts) => {
      const script = fileURLToPath(new URL('./floors/gloo_cold_calls.py', import.meta.url));
      const op = theCase.op === 'roundTrip' ? 'rtt' : 'allreduce';
      const { stdout } = await exec(PYTHON, [script, op, String(BYTES), ...counts.map(String)], {
        timeout: JOB_TIMEOUT_MS,
      });
      return clockReadings(stdout);
    },
    // Across nodes Open MPI may not use shared memory either.
    mpi: (theCase, counts) =>
      mpi(theCase.op, 2, BYTES, counts, theCase.layout === 'nodes' ? ['--mca', 'btl', 'tcp,self'] : []),
  };
}

export async function runProcessSmallCallsBench(
  options: { quick?: boolean; log?: Log; cases?: readonly ProcessCase[]; jobs?: number } = {},
): Promise<ProcessSmallCallsReport> {
  const log = options.log ?? console.log;
  // --quick: one job, no warm span (25,000 calls a job).
  const cases = (options.cases ?? PROCESS_CASES).map((c) =>
    options.quick ? { ...c, spans: c.spans.filter((s) => !s.warm) } : c,
  );
  const jobs = options.jobs ?? (options.quick ? 1 : 3);
  const dir = await mkdtemp(join(tmpdir(), 'tensorcomm-process-calls-'));
  const ours: number[][][] = cases.map(() => []);
  const anchors = cases.map(() => ({ gloo: [] as number[][], mpi: [] as number[][] }));
  const skipped: Partial<Record<Anchor, string>> = {};
  try {
    const anchorJob = anchorJobs(dir);
    for (let job = 0; job < jobs; job++) {
      for (const [i, theCase] of cases.entries()) {
        const counts = clockCounts(theCase.spans);
        ours[i].push(await tensorcommJob(theCase, { op: theCase.op, elements: BYTES / 4, counts }));
        for (const anchor of ['gloo', 'mpi'] as const) {
          if (skipped[anchor] !== undefined) continue;
          try {
            anchors[i][anchor].push(await anchorJob[anchor](theCase, counts));
          } catch (error) {
            skipped[anchor] = anchorSkipped(anchor, error);
          }
        }
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const spans = cases.flatMap((c, i) => summarizeCase(c, ours[i], anchors[i]));
  log(
    `# process ranks' 4 B calls from a fresh job's first call (Node ${process.version}, ${availableParallelism()} cores): ` +
      `2 processes of one machine (shared-memory rings), 2 "nodes" on loopback (TCP); gloo (TCP) and ` +
      `Open MPI (shared memory; across nodes TCP) make the same calls from their own start in the same run`,
  );
  log(
    `# us a call over the span, median of ${jobs} job${jobs === 1 ? '' : 's'} each; x: the median of the paired jobs' ratios`,
  );
  for (const [anchor, why] of Object.entries(skipped)) log(`# ${anchor}: skipped (${why})`);
  for (const line of formatTable(COLUMNS, spans)) log(line);
  return { node: process.version, jobs, spans, skipped };
}

export const main = benchMain('bench/process-small-calls', runProcessSmallCallsBench);

if (isMainModule(import.meta.url)) await main();
