/**
 * The start-up and 4 B rows on each Node version, from the same run: for each
 * version, bench/startup.ts and bench/small-calls.ts (beside their floor and
 * Open MPI) run in a process of that Node; then the steadiness of a fresh
 * job's 4 B round trips (2 thread ranks, a plain `await send; await recv`
 * loop, blocks of 2,000): after its first 10,000 round trips, no block's mean
 * above 2x the median block's, and that median within 1.5x of the machine's
 * Node's (20 here) in the same run. Steadiness jobs alternate between the
 * versions, round by round, so the machine's fast and slow modes fall on all.
 *
 *   npx tsx bench/node-versions.ts [--node <major>|all] [--quick] [--json <file>]
 *   npm run bench -- --node all
 *
 * The versions are the machine's `node` and those tools/node pins
 * (`npm ci --prefix tools/node` fetches them).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { median } from '../src/cli/bench/median.ts';
import { isMainModule, type Log, parseBenchArgs, writeJson } from './cli.ts';
import type { SmallCallsReport } from './small-calls.ts';
import type { StartupRow } from './startup.ts';
import { fixed, formatTable } from './table.ts';

const exec = promisify(execFile);
const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const TOOLS_NODE = fileURLToPath(new URL('../tools/node/', import.meta.url));
const PART_TIMEOUT_MS = 900_000;

/** Blocks of a steadiness job, round trips a block, and the round trips a job makes before it is judged. */
export const STEADINESS = { blocks: 12, blockSize: 2_000, judgedAfter: 10_000 } as const;
export const STEADINESS_GOALS = { worstOverMedian: 2, medianOverBaseline: 1.5 } as const;

export interface NodeVersion {
  major: number;
  version: string;
  path: string;
}

/** The machine's node, and every version tools/node pins whose binary is there. */
export function nodeVersions(): NodeVersion[] {
  const machine = {
    major: Number.parseInt(process.versions.node, 10),
    version: process.version,
    path: process.execPath,
  };
  const pinned = JSON.parse(readFileSync(join(TOOLS_NODE, 'package.json'), 'utf8')) as {
    devDependencies: Record<string, string>;
  };
  const versions = [machine];
  for (const [name, spec] of Object.entries(pinned.devDependencies)) {
    const path = join(TOOLS_NODE, 'node_modules', name, 'bin', 'node');
    const version = /@(\d+\.\d+\.\d+)$/.exec(spec)?.[1];
    if (version === undefined || !existsSync(path)) continue;
    versions.push({ major: Number.parseInt(version, 10), version: `v${version}`, path });
  }
  return versions;
}

/** The versions `--node` names: one major, or all. */
export function pickVersions(all: readonly NodeVersion[], node: string): NodeVersion[] {
  if (node === 'all') return [...all];
  const picked = all.filter((v) => String(v.major) === node);
  if (picked.length === 0) {
    throw new TypeError(
      `bench: no Node ${node} here; there are ${all.map((v) => v.major).join(', ')} (npm ci --prefix tools/node fetches the pinned ones)`,
    );
  }
  return picked;
}

/** The blocks a job judged: those after its first `judgedAfter` round trips. */
export function judgedBlocks(means: readonly number[]): number[] {
  return means.slice(STEADINESS.judgedAfter / STEADINESS.blockSize);
}

export interface Steadiness {
  /** Each job's block means (µs a round trip), in job order. */
  jobs: number[][];
  /** The median of the jobs' judged-block medians. */
  medianUs: number;
  /** Each job's worst judged block over that job's median block; the goal holds for a job when it is at most 2. */
  worstOverMedian: number[];
}

export function steadinessOf(jobs: number[][]): Steadiness {
  const judged = jobs.map(judgedBlocks);
  return {
    jobs,
    medianUs: median(judged.map((blocks) => median(blocks))),
    worstOverMedian: judged.map((blocks) => Math.max(...blocks) / median(blocks)),
  };
}

async function steadinessJob(node: NodeVersion): Promise<number[]> {
  const { stdout } = await exec(
    node.path,
    [
      '--import',
      'tsx',
      join(BENCH_DIR, 'steadiness-job.ts'),
      `${STEADINESS.blocks}`,
      `${STEADINESS.blockSize}`,
    ],
    { timeout: PART_TIMEOUT_MS },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as number[];
}

/**
 * A bench script run by `node`, its figures read back from its JSON (its table
 * printed as it is); undefined, said in the output, when it failed: the other
 * parts and versions still run.
 */
async function part<R>(node: NodeVersion, script: string, quick: boolean, log: Log): Promise<R | undefined> {
  const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-bench-node-'));
  try {
    const json = join(dir, 'figures.json');
    const args = ['--import', 'tsx', join(BENCH_DIR, script), '--json', json, ...(quick ? ['--quick'] : [])];
    const { stdout } = await exec(node.path, args, { timeout: PART_TIMEOUT_MS, maxBuffer: 16 << 20 });
    for (const line of stdout.trimEnd().split('\n')) if (!line.startsWith('# figures written')) log(line);
    return JSON.parse(readFileSync(json, 'utf8')) as R;
  } catch (error) {
    const { stderr, message } = error as { stderr?: string; message: string };
    const cause =
      (stderr ?? message).split('\n').find((line) => /^\s*rank \d+ \(|^\w*Error\b/.test(line)) ?? message;
    const saved = join(tmpdir(), `tensorcomm-bench-${script}-node${node.major}-${process.pid}.log`);
    writeFileSync(saved, stderr ?? message);
    log(`# ${script} on Node ${node.version} FAILED: ${cause.trim()} (its output: ${saved})`);
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface VersionFigures {
  node: string;
  /** Undefined where the part failed (its error is in the output). */
  startup?: StartupRow[];
  smallCalls?: SmallCallsReport;
  steadiness: Steadiness;
}

const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

export function printVersionSummary(figures: readonly VersionFigures[], log: Log): void {
  const baseline = figures[0];
  log(
    `# per Node version (same run): start-up x floor (first job, 4 / 64 ranks, .ts), 4 B calls x Open MPI (median of rounds), steadiness after ${STEADINESS.judgedAfter} round trips (vs ${baseline.node})`,
  );
  const startupOf = (f: VersionFigures, ranks: number) => {
    const row = f.startup?.find((r) => r.worldSize === ranks && r.entry === '.ts');
    return row && row.firstMs / row.floorMs;
  };
  const times = (value: number | undefined) => (value === undefined ? '-' : `${fixed(value)}x`);
  const table = formatTable<VersionFigures>(
    [
      { title: 'node', width: 10, cell: (f) => f.node },
      { title: 'start 4', width: 8, cell: (f) => times(startupOf(f, 4)) },
      { title: 'start 64', width: 9, cell: (f) => times(startupOf(f, 64)) },
      { title: 'allReduce', width: 10, cell: (f) => times(f.smallCalls?.allReduceRatio) },
      { title: 'rtt', width: 7, cell: (f) => times(f.smallCalls?.rttRatio) },
      { title: 'steady(us)', width: 11, cell: (f) => fixed(f.steadiness.medianUs) },
      {
        title: 'worst/med',
        width: 16,
        cell: (f) => f.steadiness.worstOverMedian.map((r) => fixed(r)).join(' '),
      },
      {
        title: `vs ${baseline.node}`,
        width: 12,
        cell: (f) => fixed(f.steadiness.medianUs / baseline.steadiness.medianUs),
      },
    ],
    figures,
  );
  for (const line of table) log(line);
  for (const f of figures) {
    const { worstOverMedian, medianUs } = f.steadiness;
    const ratio = medianUs / baseline.steadiness.medianUs;
    const steadyJobs = worstOverMedian.filter((r) => r <= STEADINESS_GOALS.worstOverMedian).length;
    log(
      `# ${f.node}: ${steadyJobs} of ${worstOverMedian.length} jobs with no block over ${STEADINESS_GOALS.worstOverMedian}x their median (${verdict(steadyJobs === worstOverMedian.length)}), median ${fixed(ratio)}x ${baseline.node}'s (goal <= ${STEADINESS_GOALS.medianOverBaseline}: ${verdict(ratio <= STEADINESS_GOALS.medianOverBaseline)})`,
    );
    for (const job of f.steadiness.jobs) log(`#   blocks (us): ${job.map((us) => fixed(us, 1)).join(' ')}`);
  }
}

export async function runNodeVersionsBench(options: {
  node: string;
  quick?: boolean;
  log?: Log;
}): Promise<VersionFigures[]> {
  const log = options.log ?? console.log;
  const quick = options.quick ?? false;
  const all = nodeVersions();
  const versions = pickVersions(all, options.node);
  // The steadiness baseline is the machine's Node, measured in the same run.
  const measured = versions.includes(all[0]) ? versions : [all[0], ...versions];
  const jobs = new Map<NodeVersion, number[][]>(measured.map((v) => [v, []]));
  for (let round = 0; round < (quick ? 1 : 3); round++) {
    for (const v of measured) jobs.get(v)?.push(await steadinessJob(v));
  }
  const figures: VersionFigures[] = [];
  for (const v of measured) {
    log(`## Node ${v.version}`);
    const startup = await part<StartupRow[]>(v, 'startup.ts', quick, log);
    const smallCalls = await part<SmallCallsReport>(v, 'small-calls.ts', quick, log);
    figures.push({ node: v.version, startup, smallCalls, steadiness: steadinessOf(jobs.get(v) ?? []) });
    log('');
  }
  printVersionSummary(figures, log);
  return figures;
}

export async function main(argv: readonly string[] = process.argv.slice(2), log: Log = console.log) {
  const args = parseBenchArgs(argv, 'bench/node-versions');
  const figures = await runNodeVersionsBench({ node: args.node ?? 'all', quick: args.quick, log });
  if (args.json !== undefined) await writeJson(args.json, figures, log);
  return figures;
}

if (isMainModule(import.meta.url)) await main();
