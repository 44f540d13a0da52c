/**
 * Many nodes over loopback TCP: 2 nodes x 1 rank and 2 nodes x 2 ranks
 * (processes with distinct node ids, so ranks of different nodes use the
 * network store and ranks of one node its shared memory), beside gloo
 * (torch.distributed, all over TCP) and Open MPI restricted to TCP
 * (`--mca btl tcp,self`) with as many processes, from the same run.
 *
 *   npx tsx bench/nodes.ts [--quick] [--json <file>]
 *
 * Each layout runs REPEATS rounds of (tensorcomm, gloo, Open MPI), one after
 * the other, and every figure is the median of its rounds: on a shared
 * machine the load changes from one minute to the next, and interleaved
 * rounds give each system the same mix of it.
 *
 * Goals (issue "Many nodes"): allReduce busbw at 64 MiB at least 1.5x gloo's,
 * 4 B allReduce latency at most gloo's.
 */
import { fileURLToPath } from 'node:url';
import { runCollecting } from '../test/fixtures/child-run.ts';
import { freePort } from '../test/fixtures/free-port.ts';
import { ANCHORS_DIR, type Anchor, type Figures, gloo, mpi, tcpExchangeFloor } from './anchors.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { type Column, fixed, formatTable } from './table.ts';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Rounds per layout (one with --quick). */
const REPEATS = 3;
const LAYOUTS = [
  { nodes: 2, perNode: 1 },
  { nodes: 2, perNode: 2 },
] as const;

export interface NodesRow {
  layout: string;
  figure: string;
  tensorcomm?: number;
  gloo?: number;
  mpi?: number;
  /** Whether a larger figure is better (bandwidth) or a smaller one (latency). */
  higherIsBetter: boolean;
}

export interface NodesReport {
  rows: NodesRow[];
  goals: { busbw: number | undefined; latency: number | undefined };
  /** bench/floors/tcp_exchange.c's GB/s each way: the ceiling of the 2x1 64 MiB busbw (full runs only). */
  floorGBps: number | undefined;
  skipped: string[];
}

/**
 * Runs `script` (a path from the repository root, with `args`) on `nodes` x
 * `perNode` processes of distinct node ids, torchrun's environment each, and
 * returns what rank 0 printed; fails naming the first rank that exited badly.
 */
export async function runOnNodes(
  nodes: number,
  perNode: number,
  script: string,
  args: readonly string[],
): Promise<string> {
  const port = String(await freePort());
  const worldSize = nodes * perNode;
  const runs = Array.from({ length: worldSize }, (_, rank) => {
    const run = runCollecting(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        RANK: String(rank),
        WORLD_SIZE: String(worldSize),
        LOCAL_RANK: String(rank % perNode),
        LOCAL_WORLD_SIZE: String(perNode),
        MASTER_ADDR: '127.0.0.1',
        MASTER_PORT: port,
        TENSORCOMM_NODE_ID: `bench-node-${Math.floor(rank / perNode)}`,
      },
    });
    return run.then(({ code, out }) =>
      code === 0 ? out : Promise.reject(new Error(`rank ${rank} exited with ${code}: ${out.trim()}`)),
    );
  });
  return (await Promise.all(runs))[0];
}

/** Runs the rank script on `nodes` x `perNode` processes and returns rank 0's figures. */
async function tensorcommFigures(nodes: number, perNode: number, quick: boolean): Promise<Figures> {
  const out = await runOnNodes(nodes, perNode, 'bench/nodes-rank.ts', quick ? ['--quick'] : []);
  const line = /^nodes-bench (.*)$/m.exec(out);
  if (!line) throw new Error(`rank 0 printed no figures: ${out}`);
  return JSON.parse(line[1]) as Figures;
}

const FIGURES = [
  { name: 'allreduce 4 B (us)', key: (_big: number) => 'allreduce_us_4', higherIsBetter: false },
  {
    name: 'allreduce busbw (GB/s)',
    key: (big: number) => `allreduce_busGBps_${big}`,
    higherIsBetter: true,
  },
  { name: 'p2p streaming (GB/s)', key: (big: number) => `p2p_GBps_${big}`, higherIsBetter: true },
] as const;

const COLUMNS: Column<NodesRow>[] = [
  { title: 'layout', width: 8, cell: (r) => r.layout },
  { title: 'figure', width: 30, cell: (r) => r.figure },
  { title: 'tensorcomm', width: 12, cell: (r) => fixed(r.tensorcomm) },
  { title: 'gloo', width: 10, cell: (r) => fixed(r.gloo) },
  { title: 'mpi tcp', width: 10, cell: (r) => fixed(r.mpi) },
  {
    title: 'vs gloo',
    width: 9,
    cell: (r) =>
      r.tensorcomm === undefined || r.gloo === undefined
        ? '-'
        : `${fixed(r.higherIsBetter ? r.tensorcomm / r.gloo : r.gloo / r.tensorcomm)}x`,
  },
];

export async function runNodesBench(options: { quick?: boolean; log?: Log } = {}): Promise<NodesReport> {
  const quick = options.quick ?? false;
  const log = options.log ?? console.log;
  const big = quick ? 1 << 22 : 1 << 26;
  const rows: NodesRow[] = [];
  const skipped: string[] = [];
  const figuresOf = (what: string, anchor: Anchor): Figures => {
    if (!anchor.figures) skipped.push(`${what}: ${anchor.skipped}`);
    return anchor.figures ?? {};
  };
  for (const { nodes, perNode } of LAYOUTS) {
    const layout = `${nodes}x${perNode}`;
    const world = nodes * perNode;
    const rounds: { ours: Figures; gloo: Figures; mpi: Figures }[] = [];
    for (let round = 0; round < (quick ? 1 : REPEATS); round++) {
      rounds.push({
        ours: await tensorcommFigures(nodes, perNode, quick),
        gloo: figuresOf(`gloo ${world} processes`, await gloo(ANCHORS_DIR, quick, world)),
        mpi: figuresOf(`mpi tcp ${world} processes`, await mpi(ANCHORS_DIR, world, 'tcp,self')),
      });
    }
    const ours = medians(rounds.map((r) => r.ours));
    const glooFigures = medians(rounds.map((r) => r.gloo));
    const mpiFigures = medians(rounds.map((r) => r.mpi));
    for (const figure of FIGURES) {
      const key = figure.key(big);
      // The anchors stream p2p only between two processes.
      rows.push({
        layout,
        figure: figure.name
          .replace('busbw', `${big >> 20} MiB busbw`)
          .replace('streaming', `${big >> 20} MiB streaming`),
        tensorcomm: ours[key],
        gloo: glooFigures[key],
        mpi: mpiFigures[key],
        higherIsBetter: figure.higherIsBetter,
      });
    }
  }
  const ratio = (figure: string, higherIsBetter: boolean) => {
    const ratios = rows
      .filter((r) => r.figure.startsWith(figure) && r.tensorcomm !== undefined && r.gloo !== undefined)
      .map((r) => (higherIsBetter ? r.tensorcomm! / r.gloo! : r.gloo! / r.tensorcomm!));
    return ratios.length > 0 ? Math.min(...ratios) : undefined;
  };
  // The floor exchanges 64 MiB: beside the full-size figures only.
  const floor = quick
    ? undefined
    : figuresOf('the loopback floor', await tcpExchangeFloor(await freePort()))[
        `tcp_exchange_GBps_${1 << 26}`
      ];
  const goals = { busbw: ratio(`allreduce ${big >> 20}`, true), latency: ratio('allreduce 4 B', false) };
  log(
    `# many nodes over loopback TCP (nodes x ranks per node), anchors from the same run: ` +
      `medians of ${quick ? 1 : REPEATS} interleaved rounds`,
  );
  for (const line of formatTable(COLUMNS, rows)) log(line);
  for (const why of new Set(skipped)) log(`# skipped ${why}`);
  const verdict = (value: number | undefined, goal: number) =>
    value === undefined ? 'not measured' : `${fixed(value)}x (${value >= goal ? 'met' : 'MISSED'})`;
  const twoRanks = rows.find((r) => r.layout === '2x1' && r.figure.startsWith('allreduce 64 MiB'));
  if (floor !== undefined) {
    log(
      `# loopback floor: two C processes exchanging 64 MiB each way at once, nothing else: ` +
        `${fixed(floor)} GB/s each way, the most any 2x1 allreduce of 64 MiB can reach here ` +
        `(tensorcomm ${fixed(twoRanks?.tensorcomm)}, 1.5x gloo would be ${fixed((twoRanks?.gloo ?? Number.NaN) * 1.5)})`,
    );
  }
  log(`# goal: allreduce busbw >= 1.5x gloo's: worst layout ${verdict(goals.busbw, 1.5)}`);
  log(`# goal: 4 B allreduce latency <= gloo's: worst layout ${verdict(goals.latency, 1)}`);
  return { rows, goals, floorGBps: floor, skipped };
}

/** Each figure's median over the rounds that measured it (the upper one of an even count). */
function medians(rounds: readonly Figures[]): Figures {
  const keys = new Set(rounds.flatMap((figures) => Object.keys(figures)));
  const out: Figures = {};
  for (const key of keys) {
    const values = rounds
      .map((figures) => figures[key])
      .filter((v): v is number => v !== undefined)
      .sort((a, b) => a - b);
    out[key] = values[Math.floor(values.length / 2)];
  }
  return out;
}

export const main = benchMain('bench/nodes', runNodesBench);

if (isMainModule(import.meta.url)) await main();
