/**
 * `tensorcomm predict calibrate`: times calls between two ranks of this
 * machine's backends at a few sizes (calibration-runs.ts), fits each link's
 * alpha and bandwidth (predict/calibration-fit.ts) and writes a topology of
 * alpha-beta links, so predictions of this machine can be checked against
 * tensorcomm's own runs (bench/predict.ts does).
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus, hostname } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import type { AlphaBetaLink } from '../predict/alpha-beta.ts';
import { type AlphaBetaFit, fitAlphaBeta } from '../predict/calibration-fit.ts';
import { loadTopology } from '../predict/topology.ts';
import type { TopologySpec } from '../predict/topology-spec.ts';
import type { CollectiveOp } from './bench/collectives-rank.ts';
import { type Column, fixed, formatTable } from './bench/table.ts';
import { bytes } from './bench.ts';
import { BACKEND_LABELS, type CalibrationBackend, MODEL_OPS, measureBackend } from './calibration-runs.ts';

type Log = (line: string) => void;

const KiB = 1024;
const MiB = 1024 * KiB;

/** Latency from the small sizes, bandwidth from the large: four decades of the ping-pong's curve. */
const DEFAULT_SIZES = [4 * KiB, 64 * KiB, MiB, 16 * MiB];
/**
 * Far apart: small messages between a node's ranks travel inline (mailboxes, call regions), about a
 * microsecond, where the large take the rings; with the large at 4 MiB a short batch's jitter could
 * make the fit see no growth with size.
 */
const QUICK_SIZES = [4 * KiB, 16 * MiB];
const BUDGET_MS = { full: 200, quick: 20 };
const ROUNDS = { full: 5, quick: 3 };
/**
 * The calls timed per link, each for the term of the alpha-beta model it brings out (2 ranks): a
 * ping-pong goes one way at a time (alpha + S/B), an allToAll sends both ways at once
 * (alpha + S/2D), an allReduce exchanges as much again and reduces (2 alpha + S/D + S/2G).
 */
const CALIBRATION_CALLS: readonly { op: CollectiveOp; term: string; why: string }[] = [
  { op: 'sendRecv', term: 'bandwidth', why: 'one way = rtt / 2' },
  { op: 'allToAll', term: 'duplex', why: 'both ranks send at once' },
  { op: 'allReduce', term: 'reduce', why: 'exchanges twice as much, and reduces' },
];
const TOPOLOGY_FILE = /\.(ya?ml|json)$/i;

export const CALIBRATE_HELP = `Times send/recv (ping-pong, rtt / 2), allToAll and allReduce between 2 ranks at each size:
inside a node (2 processes over the file store's rings, or 2 thread ranks with --threads) and
between 2 "nodes" of one job over loopback TCP; fits each link's alpha (latency), bandwidth (one
way), duplex bandwidth (each way while both ranks send) and reduction rate by least squares and
writes a topology whose links are 'alpha-beta' with the fitted values.

options:
  --out <file>           where the topology goes: .yaml, .yml or .json (default calibrated-topology.yaml)
  --threads              inside a node, time thread ranks (memory store) instead of processes
  --sizes <n,…>          message sizes with an optional K/M/G suffix, two or more (default 4K,64K,1M,16M)
  --rounds <n>           timed batches per size, the median kept (default ${ROUNDS.full})
  --ranks-per-node <n>   the topology's ranks (GPUs) a node, at least 2 (default 8)
  --quick                sizes 4K,4M (unless --sizes), short batches: a smoke run of seconds`;

export interface CalibrateOptions {
  out: string;
  intra: Extract<CalibrationBackend, 'threads' | 'processes'>;
  sizes: number[];
  rounds: number;
  budgetMs: number;
  ranksPerNode: number;
}

function integerFlag(text: string | undefined, flag: string, min: number, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`--${flag}: expected an integer of at least ${min}, got "${text}"`);
  }
  return value;
}

/** The command line as options; an unknown flag or a bad value is an error naming it. */
export function parseCalibrateArgs(argv: readonly string[]): CalibrateOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      out: { type: 'string', default: 'calibrated-topology.yaml' },
      threads: { type: 'boolean', default: false },
      sizes: { type: 'string' },
      rounds: { type: 'string' },
      'ranks-per-node': { type: 'string' },
      quick: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (!TOPOLOGY_FILE.test(values.out)) {
    throw new RangeError(`--out: a topology file ends .yaml, .yml or .json, got "${values.out}"`);
  }
  const sizes = values.sizes
    ? [...new Set(values.sizes.split(',').map((s) => bytes(s, 'sizes')))].sort((a, b) => a - b)
    : values.quick
      ? QUICK_SIZES
      : DEFAULT_SIZES;
  if (sizes.length < 2) {
    throw new RangeError(
      `--sizes: two or more sizes (one cannot tell latency from bandwidth), got "${values.sizes}"`,
    );
  }
  return {
    out: values.out,
    intra: values.threads ? 'threads' : 'processes',
    sizes,
    rounds: integerFlag(values.rounds, 'rounds', 1, values.quick ? ROUNDS.quick : ROUNDS.full),
    budgetMs: values.quick ? BUDGET_MS.quick : BUDGET_MS.full,
    ranksPerNode: integerFlag(values['ranks-per-node'], 'ranks-per-node', 2, 8),
  };
}

/** One link's fit, and the backend it was timed on. */
export interface LinkCalibration {
  link: 'intraNode' | 'interNode';
  backend: CalibrationBackend;
  fit: AlphaBetaFit;
}

/** Times the calibration's calls on `backend` and fits the link they crossed. */
async function calibrateLink(
  link: LinkCalibration['link'],
  backend: CalibrationBackend,
  options: Pick<CalibrateOptions, 'sizes' | 'rounds' | 'budgetMs'>,
): Promise<LinkCalibration> {
  const calls = await measureBackend(backend, {
    ops: CALIBRATION_CALLS.map((c) => c.op),
    sizes: options.sizes,
    budgetMs: options.budgetMs,
    batches: options.rounds,
  });
  const fit = fitAlphaBeta(calls.map((c) => ({ op: MODEL_OPS[c.op], ranks: 2, bytes: c.bytes, us: c.us })));
  return { link, backend, fit };
}

/** Both links of this machine: inside a node on `intra`, between nodes over loopback TCP. */
export async function calibrateLinks(
  options: Pick<CalibrateOptions, 'intra' | 'sizes' | 'rounds' | 'budgetMs'>,
  log: Log,
): Promise<[LinkCalibration, LinkCalibration]> {
  log(`# timing ${BACKEND_LABELS[options.intra]}`);
  const intra = await calibrateLink('intraNode', options.intra, options);
  log(`# timing ${BACKEND_LABELS.nodes}`);
  const inter = await calibrateLink('interNode', 'nodes', options);
  return [intra, inter];
}

/** Four significant digits: the fit is no better than the timings' noise. */
const significant = (value: number) => Number(value.toPrecision(4));

/** A fitted link as a topology's: the optional rates only where the fit found them. */
function alphaBeta(link: AlphaBetaLink) {
  return {
    kind: 'alpha-beta' as const,
    latencyUs: significant(link.alphaUs),
    bandwidthGBps: significant(link.bandwidthGBps),
    ...(link.duplexGBps !== undefined && { duplexGBps: significant(link.duplexGBps) }),
    ...(link.reduceGBps !== undefined && { reduceGBps: significant(link.reduceGBps) }),
  };
}

/** Two nodes of `ranksPerNode` ranks with the fitted links; loadTopology takes it as is. */
export function calibratedSpec(
  intra: AlphaBetaLink,
  inter: AlphaBetaLink,
  ranksPerNode: number,
): TopologySpec {
  return {
    name: `calibrated ${hostname()}`,
    nodes: 2,
    gpusPerNode: ranksPerNode,
    intraNode: alphaBeta(intra),
    interNode: { ...alphaBeta(inter), nics: 1 },
  };
}

const FIT_COLUMNS: readonly Column<LinkCalibration>[] = [
  { title: 'link', width: 10, cell: (r) => r.link },
  { title: 'measured on', width: 32, cell: (r) => BACKEND_LABELS[r.backend] },
  { title: 'alpha(us)', width: 11, cell: (r) => fixed(r.fit.alphaUs) },
  { title: 'bandwidth(GB/s)', width: 17, cell: (r) => fixed(r.fit.bandwidthGBps, 3) },
  // Where the fit left a rate out, its default: D = B, reductions free.
  { title: 'duplex(GB/s)', width: 14, cell: (r) => fixed(r.fit.duplexGBps ?? r.fit.bandwidthGBps, 3) },
  { title: 'reduce(GB/s)', width: 14, cell: (r) => (r.fit.reduceGBps ? fixed(r.fit.reduceGBps, 3) : 'free') },
  { title: 'fit rms err', width: 13, cell: (r) => `${fixed(r.fit.rmsError * 100, 1)}%` },
];

/** The fits as a table, the calls they came from named above it. */
export function fitLines(
  links: readonly LinkCalibration[],
  sizes: readonly number[],
  rounds: number,
): string[] {
  return [
    '# alpha-beta fit by least squares of the relative error, 2 ranks, every call at once:',
    ...CALIBRATION_CALLS.map((c) => `#   ${c.term.padEnd(10)} from ${c.op} (${c.why})`),
    `# sizes ${sizes.join(', ')} B, median of ${rounds} batches each`,
    ...formatTable(FIT_COLUMNS, links),
  ];
}

function fileText(out: string, spec: TopologySpec, options: CalibrateOptions): string {
  if (/\.json$/i.test(out)) return `${JSON.stringify(spec, null, 2)}\n`;
  const machine = `node ${process.version}, ${availableParallelism()} x ${cpus()[0]?.model ?? 'unknown CPU'}`;
  return [
    `# tensorcomm predict calibrate, ${new Date().toISOString()}: ${machine}`,
    `# intraNode from ${BACKEND_LABELS[options.intra]}, interNode from ${BACKEND_LABELS.nodes}`,
    stringify(spec),
  ].join('\n');
}

export async function calibrateCommand(options: CalibrateOptions, log: Log): Promise<number> {
  const links = await calibrateLinks(options, log);
  const [intra, inter] = links;
  const spec = calibratedSpec(intra.fit, inter.fit, options.ranksPerNode);
  // What is written must load: a fit the topology checks refuse is this command's bug, not the user's.
  loadTopology(spec);
  writeFileSync(options.out, fileText(options.out, spec, options));
  for (const line of fitLines(links, options.sizes, options.rounds)) log(line);
  log(`# topology written to ${resolve(options.out)}`);
  return 0;
}
