/**
 * Traces: every communication call of every rank with start, end, bytes and
 * peers, written as a Chrome trace / Perfetto JSON file (one track per rank:
 * open it in ui.perfetto.dev or chrome://tracing), with a per-op summary
 * (count, bytes, total time, busbw) in its `otherData`, and beside it each
 * rank's network bytes at its end, per peer (`network`: what ctx.networkStats()
 * said), so a trace shows which ranks' traffic crossed between nodes.
 *
 * Each rank writes its calls to `<trace>.rank<r>.part` when it closes; the
 * launcher merges the parts into `<trace>` once every rank has exited and
 * removes them (spawnThreads does; a process launcher calls mergeTraceParts).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { NetworkStats } from '../runtime/network-stats.ts';
import { busFactor } from './bus-factor.ts';
import type { CallEntry } from './call-record.ts';

export interface ChromeTraceEvent {
  name: string;
  cat?: string;
  ph: 'X' | 'M';
  ts?: number;
  dur?: number;
  pid: number;
  tid: number;
  args: Record<string, unknown>;
}

export interface TraceSummaryRow {
  op: string;
  count: number;
  bytes: number;
  /** Sum of the calls' durations, in microseconds. */
  totalUs: number;
  /** Bus bandwidth over all calls of the op, GB/s (nccl-tests' factors; 0 for barrier). */
  busbw: number;
}

export interface ChromeTrace {
  traceEvents: ChromeTraceEvent[];
  displayTimeUnit: 'ms';
  otherData: {
    tool: 'tensorcomm';
    worldSize: number;
    droppedEvents: number;
    summary: TraceSummaryRow[];
    /** Each rank's network bytes when it closed, by global rank (ranks that wrote no part are missing). */
    network: Record<number, NetworkStats>;
  };
}

/** The file a job's trace goes to: `trace` itself when it ends in .json, else a new file in that directory. */
export function resolveTracePath(trace: string): string {
  if (trace.endsWith('.json')) return trace;
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  return join(trace, `tensorcomm-trace-${stamp}-${process.pid}.json`);
}

export function tracePartPath(trace: string, rank: number): string {
  return `${trace}.rank${rank}.part`;
}

/** What one rank leaves for the trace: its calls, how many it dropped, and its network bytes. */
export interface TracePart {
  entries: CallEntry[];
  dropped: number;
  network?: NetworkStats;
}

export function writeTracePart(
  trace: string,
  rank: number,
  entries: CallEntry[],
  dropped: number,
  network?: NetworkStats,
): void {
  mkdirSync(dirname(trace), { recursive: true });
  const part: TracePart = { entries, dropped, network };
  writeFileSync(tracePartPath(trace, rank), JSON.stringify({ rank, ...part }));
}

/** Some ranks' calls, as their parts held them: what one node of a job contributes to its trace. */
export interface TraceShare {
  entries: CallEntry[];
  dropped: number;
  /** The ranks' network bytes, by global rank. */
  network?: Record<number, NetworkStats>;
}

/** One rank's part as a share of the trace: its network bytes keyed by its rank. */
export function partShare(rank: number, part: TracePart): TraceShare {
  const { entries, dropped, network } = part;
  return network ? { entries, dropped, network: { [rank]: network } } : { entries, dropped };
}

/** The parts of `ranks` found beside `trace`, removed from disk. A rank that died before closing wrote none. */
export function readTraceParts(trace: string, ranks: Iterable<number>): TraceShare {
  const share: TraceShare = { entries: [], dropped: 0 };
  for (const rank of ranks) {
    const part = tracePartPath(trace, rank);
    if (!existsSync(part)) continue;
    const parsed = partShare(rank, JSON.parse(readFileSync(part, 'utf8')) as TracePart);
    share.entries.push(...parsed.entries);
    share.dropped += parsed.dropped;
    if (parsed.network) share.network = { ...share.network, ...parsed.network };
    rmSync(part, { force: true });
  }
  return share;
}

/** One Chrome trace at `trace` from every node's share of the job's calls. */
export function writeTrace(trace: string, shares: readonly TraceShare[], worldSize: number): ChromeTrace {
  const entries = shares.flatMap((s) => s.entries);
  const dropped = shares.reduce((sum, s) => sum + s.dropped, 0);
  const network = Object.assign({}, ...shares.map((s) => s.network ?? {})) as Record<number, NetworkStats>;
  const chrome = toChromeTrace(entries, worldSize, dropped, network);
  mkdirSync(dirname(trace), { recursive: true });
  writeFileSync(trace, JSON.stringify(chrome));
  return chrome;
}

/** Merges the ranks' parts into one Chrome trace at `trace`, removes the parts, and returns the trace. */
export function mergeTraceParts(trace: string, worldSize: number): ChromeTrace {
  return writeTrace(
    trace,
    [
      readTraceParts(
        trace,
        Array.from({ length: worldSize }, (_, r) => r),
      ),
    ],
    worldSize,
  );
}

export function toChromeTrace(
  entries: readonly CallEntry[],
  worldSize: number,
  dropped = 0,
  network: Record<number, NetworkStats> = {},
): ChromeTrace {
  const tracks: ChromeTraceEvent[] = Array.from({ length: worldSize }, (_, rank) => ({
    name: 'thread_name',
    ph: 'M',
    pid: 0,
    tid: rank,
    args: { name: `rank ${rank}` },
  }));
  const calls: ChromeTraceEvent[] = entries.map((e) => ({
    name: e.op,
    cat: e.group,
    ph: 'X',
    ts: e.startUs,
    dur: Math.max(0, (e.endUs || e.startUs) - e.startUs),
    pid: 0,
    tid: e.rank,
    args: {
      call: e.call,
      seq: e.seq,
      group: e.group,
      bytes: e.bytes,
      peers: e.peers,
      status: e.status,
      ...(e.error ? { error: e.error } : {}),
      ...(e.site ? { site: e.site } : {}),
    },
  }));
  return {
    traceEvents: [...tracks, ...calls],
    displayTimeUnit: 'ms',
    otherData: {
      tool: 'tensorcomm',
      worldSize,
      droppedEvents: dropped,
      summary: summarizeCalls(entries),
      network,
    },
  };
}

/** Per op over all ranks: how many calls, their bytes and time, and the bus bandwidth they achieved. */
export function summarizeCalls(entries: readonly CallEntry[]): TraceSummaryRow[] {
  const rows = new Map<string, TraceSummaryRow & { busBytes: number }>();
  for (const e of entries) {
    if (e.status !== 'ok') continue;
    const row = rows.get(e.op) ?? { op: e.op, count: 0, bytes: 0, totalUs: 0, busbw: 0, busBytes: 0 };
    row.count++;
    row.bytes += e.bytes;
    row.totalUs += e.endUs - e.startUs;
    row.busBytes += e.bytes * busFactor(e.op, e.groupSize);
    rows.set(e.op, row);
  }
  return [...rows.values()]
    .map(({ busBytes, ...row }) => ({ ...row, busbw: row.totalUs > 0 ? busBytes / row.totalUs / 1e3 : 0 }))
    .sort((a, b) => b.totalUs - a.totalUs);
}
