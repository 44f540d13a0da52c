/**
 * The predicted timeline as a Chrome trace / Perfetto JSON file, laid out as
 * the cluster would run it: one process per node, one thread per rank, one
 * slice per call from its predicted start to its end, and an arrow from each
 * send to the receive that took its message. Its `otherData` has the shape of
 * a measured trace's (src/debug/trace.ts), summary included, so
 * `tensorcomm trace` prints a predicted trace's per-op summary as it prints a
 * measured one's.
 */
import type { ChromeTrace, ChromeTraceEvent, TraceSummaryRow } from '../debug/trace.ts';
import type { PredictedCall, PredictReport } from './report.ts';
import { addCall, type CallTotals, emptyTotals, perTime } from './report-table.ts';

/** A flow event: `id` pairs an 's' (the send) with its 'f' (the receive). */
export interface FlowEvent extends Omit<ChromeTraceEvent, 'ph' | 'dur'> {
  ph: 's' | 'f';
  ts: number;
  id: number;
  /** 'e': bind to the slice enclosing `ts`, not to the next one to start (Chrome's default for 'f'). */
  bp?: 'e';
}

export type PredictedTraceEvent = ChromeTraceEvent | FlowEvent;

export interface PredictedTrace {
  traceEvents: PredictedTraceEvent[];
  displayTimeUnit: 'ms';
  otherData: ChromeTrace['otherData'] & {
    /** Marks the times as the model's, not measured. */
    predicted: true;
    topology: string;
  };
}

/** `nodeOf` places a rank on its node, the trace's process (default: all on node 0). */
export function toPredictedTrace(
  report: PredictReport,
  nodeOf: (rank: number) => number = () => 0,
): PredictedTrace {
  const ranks = report.ranks.map((r) => r.rank).sort((a, b) => a - b);
  const nodes = [...new Set(ranks.map(nodeOf))].sort((a, b) => a - b);
  const processes: ChromeTraceEvent[] = nodes.map((node) => ({
    name: 'process_name',
    ph: 'M',
    pid: node,
    tid: 0,
    args: { name: `node ${node}` },
  }));
  const threads: ChromeTraceEvent[] = ranks.map((rank) => ({
    name: 'thread_name',
    ph: 'M',
    pid: nodeOf(rank),
    tid: rank,
    args: { name: `rank ${rank}` },
  }));
  const slices: ChromeTraceEvent[] = report.calls.map((call) => ({
    name: call.op,
    cat: call.group,
    ph: 'X',
    ts: call.startUs,
    dur: call.endUs - call.startUs,
    pid: nodeOf(call.rank),
    tid: call.rank,
    args: {
      group: call.group,
      seq: call.seq,
      bytes: call.bytes,
      algorithm: call.algorithm,
      protocol: call.protocol,
      busbwGBps: call.busbwGBps,
      ...(call.peer === undefined ? {} : { peer: call.peer }),
    },
  }));
  return {
    traceEvents: [...processes, ...threads, ...slices, ...messageFlows(report.calls, nodeOf)],
    displayTimeUnit: 'ms',
    otherData: {
      tool: 'tensorcomm',
      predicted: true,
      topology: report.topology,
      worldSize: ranks.length,
      droppedEvents: 0,
      summary: summarize(report.calls),
      network: {},
    },
  };
}

/**
 * The k-th send from a to b in a group carried the message of the k-th
 * receive on b from a (point-to-point order is per pair, as in NCCL), k in
 * seq order. ThreadGroup's point-to-point ops name their direction first
 * (send, sendViews; recv, recvObject, recvViews, recvFromAny), and any of its
 * sends may meet any of its receives. A send whose receive is missing (the
 * job stopped) gets no arrow.
 */
function messageFlows(calls: readonly PredictedCall[], nodeOf: (rank: number) => number): FlowEvent[] {
  const sends = new Map<string, PredictedCall[]>();
  const recvs = new Map<string, PredictedCall[]>();
  for (const call of calls) {
    if (call.peer === undefined) continue;
    if (call.op.startsWith('send')) push(sends, `${call.group}\0${call.rank}\0${call.peer}`, call);
    else if (call.op.startsWith('recv')) push(recvs, `${call.group}\0${call.peer}\0${call.rank}`, call);
  }
  const bySeq = (x: PredictedCall, y: PredictedCall) => x.seq - y.seq;
  const flows: FlowEvent[] = [];
  for (const [pair, sent] of sends) {
    const received = (recvs.get(pair) ?? []).sort(bySeq);
    sent.sort(bySeq).forEach((send, k) => {
      const recv = received[k];
      if (!recv) return;
      const id = flows.length / 2 + 1;
      // mid-slice, so each end binds to its own slice and not to a neighbour that starts or ends there
      flows.push(flowEnd('s', id, send, nodeOf), { ...flowEnd('f', id, recv, nodeOf), bp: 'e' });
    });
  }
  return flows;
}

function flowEnd(
  ph: 's' | 'f',
  id: number,
  call: PredictedCall,
  nodeOf: (rank: number) => number,
): FlowEvent {
  return {
    name: 'message',
    cat: call.group,
    ph,
    id,
    ts: (call.startUs + call.endUs) / 2,
    pid: nodeOf(call.rank),
    tid: call.rank,
    args: {},
  };
}

function push<V>(map: Map<string, V[]>, key: string, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** Per op over all ranks, as a measured trace's summary: count, bytes, time, and busbw over that time. */
function summarize(calls: readonly PredictedCall[]): TraceSummaryRow[] {
  const ops = new Map<string, CallTotals>();
  for (const call of calls) {
    const totals = ops.get(call.op) ?? emptyTotals();
    addCall(totals, call);
    ops.set(call.op, totals);
  }
  return [...ops]
    .map(([op, t]) => ({
      op,
      count: t.calls,
      bytes: t.bytes,
      totalUs: t.totalUs,
      busbw: perTime(t.busBytes, t),
    }))
    .sort((a, b) => b.totalUs - a.totalUs);
}
