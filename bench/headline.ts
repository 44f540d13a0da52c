/**
 * The README's headline table: a few figures a newcomer asks about first,
 * each beside its anchors from the same bench run, written by
 * `npm run bench -- --markdown` (bench/run.ts), never by hand.
 */
import { median } from '../src/cli/bench/median.ts';
import type { ColdCallsReport } from './cold-calls.ts';
import type { Goal } from './compare.ts';
import type { ProcessSmallCallsReport } from './process-small-calls.ts';
import type { SmallCallsReport } from './small-calls.ts';
import type { StartupRow } from './startup.ts';
import { fixed } from './table.ts';

export interface HeadlineRun {
  smallCalls: SmallCallsReport;
  coldCalls: ColdCallsReport;
  processCalls: ProcessSmallCallsReport;
  goals: readonly Goal[];
  startup: readonly StartupRow[];
}

interface Row {
  figure: string;
  tensorcomm: string;
  anchors: string;
  ratio: string;
}

const us = (value: number | undefined) => (value === undefined ? '-' : `${fixed(value)} µs`);
const times = (value: number | undefined, of: string) =>
  value === undefined ? '-' : `${fixed(value)}× ${of}`;
const medianOf = (values: readonly (number | undefined)[]) => {
  const known = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
  return known.length === 0 ? undefined : median(known);
};

function warmSmallCalls(report: SmallCallsReport, op: 'allReduce' | 'rtt', what: string): Row {
  const ours = medianOf(report.rounds.map((r) => (op === 'rtt' ? r.rttUs : r.allReduceUs)));
  const mpi = medianOf(report.rounds.map((r) => (op === 'rtt' ? r.mpiRttUs : r.mpiAllReduceUs)));
  return {
    figure: `${what}, 2 thread ranks, warm`,
    tensorcomm: us(ours),
    anchors: `Open MPI ${us(mpi)}`,
    ratio: times(op === 'rtt' ? report.rttRatio : report.allReduceRatio, 'Open MPI'),
  };
}

function coldRoundTrip(report: ColdCallsReport): Row | undefined {
  const span = report.spans.find(
    (s) => s.ranks === 2 && s.op === 'roundTrip' && s.span.from === 0 && s.span.to === 3_000,
  );
  return (
    span && {
      figure: "4 B round trip, 2 thread ranks, a fresh job's first 3,000 (cold)",
      tensorcomm: us(span.tensorcommUs),
      anchors: `Open MPI ${us(span.mpiUs)}`,
      ratio: times(span.ratio, 'Open MPI'),
    }
  );
}

function coldProcesses(
  report: ProcessSmallCallsReport,
  layout: 'processes' | 'nodes',
  what: string,
): Row | undefined {
  const span = report.spans.find((s) => s.layout === layout && s.span.from === 0 && s.span.to === 3_000);
  return (
    span && {
      figure: `${what}, a fresh job's first 3,000 (cold)`,
      tensorcomm: us(span.tensorcommUs),
      anchors: `gloo ${us(span.glooUs)}, Open MPI ${us(span.mpiUs)}`,
      ratio: times(span.xGloo, 'gloo'),
    }
  );
}

function goalRow(goals: readonly Goal[], figure: string, label: string): Row | undefined {
  const goal = goals.find((g) => g.figure === figure);
  return (
    goal && {
      figure: label,
      tensorcomm: goal.tensorcomm === undefined ? '-' : `${fixed(goal.tensorcomm)} ${goal.unit}`,
      anchors: `${goal.against} ${goal.anchor === undefined ? '-' : `${fixed(goal.anchor)} ${goal.unit}`}`,
      ratio: times(goal.ratio, goal.against),
    }
  );
}

function startup(rows: readonly StartupRow[], worldSize: number): Row | undefined {
  const row = rows.find((r) => r.worldSize === worldSize && r.entry.endsWith('.ts'));
  return (
    row && {
      figure: `start-up of ${worldSize} thread ranks, a process's first job`,
      tensorcomm: `${fixed(row.firstMs, 0)} ms`,
      anchors: `${worldSize} bare Workers ${fixed(row.floorMs, 0)} ms`,
      ratio: times(row.firstMs / row.floorMs, 'bare Workers'),
    }
  );
}

/** The table's lines, in markdown. */
export function headlineMarkdown(run: HeadlineRun): string[] {
  const rows = [
    warmSmallCalls(run.smallCalls, 'rtt', '4 B round trip'),
    warmSmallCalls(run.smallCalls, 'allReduce', '4 B allReduce'),
    coldRoundTrip(run.coldCalls),
    coldProcesses(run.processCalls, 'processes', '4 B round trip, 2 rank processes'),
    coldProcesses(run.processCalls, 'nodes', '4 B allReduce, 2 "nodes" over loopback'),
    goalRow(run.goals, 'allReduce 64 MiB float32 busbw, 2 ranks', 'allReduce 64 MiB busbw, 2 thread ranks'),
    goalRow(run.goals, 'send/recv 64 MiB one way, 2 processes', 'send/recv 64 MiB, 2 rank processes'),
    startup(run.startup, 64),
  ].filter((row): row is Row => row !== undefined);
  return [
    '| figure | tensorcomm | anchors, same run | ratio |',
    '| --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.figure} | ${r.tensorcomm} | ${r.anchors} | ${r.ratio} |`),
  ];
}
