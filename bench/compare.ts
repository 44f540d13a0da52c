/**
 * tensorcomm beside the anchors, at the sizes the anchors measure, and the
 * goals as ratios of figures from the same run.
 */
import type { Anchor, AnchorsReport, Figures } from './anchors.ts';
import type { Log } from './cli.ts';
import type { CollectiveOp, CollectiveRow, CollectivesReport } from './collectives.ts';
import { type Column, fixed, formatTable } from './table.ts';

/** The sizes gloo_bench.py and mpi_bench.c measure. */
const ANCHOR_SIZES = [4, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26];
const MiB = 1 << 20;

export interface Goal {
  figure: string;
  unit: string;
  tensorcomm?: number;
  /** What tensorcomm is measured against; `anchor` is its figure. */
  against: string;
  anchor?: number;
  /** tensorcomm / anchor. */
  ratio?: number;
  goal: string;
  met?: boolean;
  /** Why a figure is missing, or what else it is worth knowing beside. */
  note?: string;
}

function row(
  report: CollectivesReport,
  op: CollectiveOp,
  bytes: number,
  worldSize = 2,
): CollectiveRow | undefined {
  return report.rows.find((r) => r.op === op && r.worldSize === worldSize && r.bytes === bytes);
}

const figure = (anchor: Anchor, key: string): number | undefined => anchor.figures?.[key];

interface SizeLine {
  bytes: number;
  ours?: CollectiveRow;
  gloo?: Figures;
  mpi?: Figures;
  node?: Figures;
}

const SIZE: Column<SizeLine> = { title: 'size(B)', width: 12, cell: (l) => String(l.bytes) };

const ALL_REDUCE_COLUMNS: readonly Column<SizeLine>[] = [
  SIZE,
  { title: 'tensorcomm(us)', width: 16, cell: (l) => fixed(l.ours?.timeUs) },
  { title: 'gloo(us)', width: 11, cell: (l) => fixed(l.gloo?.[`allreduce_us_${l.bytes}`]) },
  { title: 'mpi(us)', width: 10, cell: (l) => fixed(l.mpi?.[`allreduce_us_${l.bytes}`]) },
  { title: 'tensorcomm busbw', width: 18, cell: (l) => fixed(l.ours?.busbw, 3) },
  { title: 'gloo busbw', width: 12, cell: (l) => fixed(l.gloo?.[`allreduce_busGBps_${l.bytes}`], 3) },
  { title: 'mpi busbw', width: 11, cell: (l) => fixed(l.mpi?.[`allreduce_busGBps_${l.bytes}`], 3) },
];

const P2P_COLUMNS: readonly Column<SizeLine>[] = [
  SIZE,
  { title: 'tensorcomm GB/s', width: 17, cell: (l) => fixed(l.ours?.algbw, 3) },
  { title: 'gloo GB/s', width: 11, cell: (l) => fixed(l.gloo?.[`p2p_GBps_${l.bytes}`], 3) },
  { title: 'mpi GB/s', width: 10, cell: (l) => fixed(l.mpi?.[`p2p_GBps_${l.bytes}`], 3) },
  { title: 'node set GB/s', width: 15, cell: (l) => fixed(l.node?.[`copy_GBps_${l.bytes}`], 3) },
];

/** `ranks` says how tensorcomm's ranks ran, e.g. "threads" or "processes (FileTensorStore)". */
export function printComparison(
  collectives: CollectivesReport,
  anchors: AnchorsReport,
  log: Log,
  ranks = 'threads',
): void {
  const lines = (op: CollectiveOp) =>
    ANCHOR_SIZES.map((bytes) => ({
      bytes,
      ours: row(collectives, op, bytes),
      gloo: anchors.gloo.figures,
      mpi: anchors.mpi.figures,
      node: anchors.node.figures,
    })).filter((l) => l.ours);
  log(`# allReduce float32, 2 ranks as ${ranks}, beside the anchors (busbw in GB/s)`);
  for (const line of formatTable(ALL_REDUCE_COLUMNS, lines('allReduce'))) log(line);
  log('');
  log(
    `# point to point, 2 ranks as ${ranks}, GB/s: tensorcomm one way (ping-pong rtt / 2), gloo and MPI streaming one way,`,
  );
  log('# node: TypedArray.set between SharedArrayBuffers (the copy a receiver makes)');
  for (const line of formatTable(P2P_COLUMNS, lines('sendRecv'))) log(line);
  log('');
}

interface GoalInput extends Omit<Goal, 'ratio' | 'met'> {
  meets: (ratio: number) => boolean;
  /** Said when the anchor side has no figure. */
  anchorMissing: string;
}

function goal({ meets, anchorMissing, ...g }: GoalInput, notMeasured: string): Goal {
  if (g.tensorcomm === undefined) return { ...g, note: notMeasured };
  if (g.anchor === undefined) return { ...g, note: anchorMissing };
  const ratio = g.tensorcomm / g.anchor;
  return { ...g, ratio, met: meets(ratio) };
}

const skipped = (anchor: Anchor) => `skipped: ${anchor.skipped ?? 'no such figure'}`;

/** `processes`: the same bench with ranks as processes over FileTensorStore, for the multi-process goals. */
export function evaluateGoals(
  collectives: CollectivesReport,
  anchors: AnchorsReport,
  processes?: CollectivesReport,
): Goal[] {
  const notMeasured = collectives.quick ? 'not measured with --quick' : 'not measured';
  const small = collectives.zeroCopy.find((z) => z.bytes === 4096);
  const big = collectives.zeroCopy.find((z) => z.bytes === 64 * MiB);
  const goals: GoalInput[] = [
    {
      figure: 'send/recv 4 B round trip, 2 ranks',
      unit: 'us',
      tensorcomm: row(collectives, 'sendRecv', 4)?.rttUs,
      against: 'Open MPI',
      anchor: figure(anchors.mpi, 'p2p_rtt_us'),
      goal: '<= 2x',
      meets: (r) => r <= 2,
      anchorMissing: skipped(anchors.mpi),
    },
    {
      figure: 'allReduce 64 MiB float32 busbw, 2 ranks',
      unit: 'GB/s',
      tensorcomm: row(collectives, 'allReduce', 64 * MiB)?.busbw,
      against: 'gloo',
      anchor: figure(anchors.gloo, 'allreduce_busGBps_67108864'),
      goal: '>= 2x',
      meets: (r) => r >= 2,
      anchorMissing: skipped(anchors.gloo),
    },
    {
      // O(1): a view on the producer's memory costs the same whatever its size.
      figure: 'zero-copy destGet 64 MiB',
      unit: 'us',
      tensorcomm: big?.destGetUs,
      against: 'destGet 4 KiB',
      anchor: small?.destGetUs,
      goal: '<= 2x, O(1)',
      meets: (r) => r <= 2,
      anchorMissing: 'not measured',
      note: big && `a TypedArray.set copy of the 64 MiB takes ${fixed(big.copyUs)} us`,
    },
    {
      figure: 'send/recv 64 MiB one way, 2 processes',
      unit: 'GB/s',
      tensorcomm: processes && row(processes, 'sendRecv', 64 * MiB)?.algbw,
      against: 'gloo',
      anchor: figure(anchors.gloo, 'p2p_GBps_67108864'),
      goal: '>= 1.5x',
      meets: (r) => r >= 1.5,
      anchorMissing: skipped(anchors.gloo),
    },
    {
      figure: 'send/recv 4 B round trip, 2 processes',
      unit: 'us',
      tensorcomm: processes && row(processes, 'sendRecv', 4)?.rttUs,
      against: 'gloo',
      anchor: figure(anchors.gloo, 'p2p_rtt_us'),
      goal: '< 1x',
      meets: (r) => r < 1,
      anchorMissing: skipped(anchors.gloo),
    },
  ];
  return goals.map((g) => goal(g, notMeasured));
}

export function printGoals(goals: readonly Goal[], log: Log): void {
  log('# goals (ratios of figures from this run)');
  for (const g of goals) {
    const figures = `tensorcomm ${fixed(g.tensorcomm)} ${g.unit} vs ${g.against} ${fixed(g.anchor)} ${g.unit}`;
    const verdict =
      g.ratio === undefined ? 'n/a' : `${fixed(g.ratio)}x (goal ${g.goal}: ${g.met ? 'met' : 'missed'})`;
    log(`#   ${g.figure}: ${figures} = ${verdict}${g.note ? ` (${g.note})` : ''}`);
  }
}
