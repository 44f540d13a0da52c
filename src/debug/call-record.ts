/** One communication call as the debugging tools see it: flight recorder entry, trace event, report line. */
import type { CapturedSite } from './call-site.ts';

/**
 * Ops by code, for the status board's numeric fields. The layer that defines
 * the ops (thread-group's op table) registers their names, so this layer
 * never imports upward; every rank registers the same list, so codes agree.
 */
let opNames: readonly string[] = [];
let opCodes = new Map<string, number>();

export function registerOpNames(names: readonly string[]): void {
  opNames = Object.freeze([...names]);
  opCodes = new Map(opNames.map((name, i) => [name, i]));
}

/** -1 for an op nobody registered. */
export function opCode(op: string): number {
  return opCodes.get(op) ?? -1;
}

export function opName(code: number): string | undefined {
  return opNames[code];
}

/** Every registered op, in code order. */
export function registeredOpNames(): readonly string[] {
  return opNames;
}

export type CallStatus = 'pending' | 'ok' | 'failed';

export interface CallRecord {
  /** Global rank that made the call. */
  rank: number;
  group: string;
  groupCode: number;
  groupSize: number;
  /** Per-group collective number; -1 for point-to-point calls (matched per stream). */
  seq: number;
  op: string;
  /** What the call was, e.g. `allReduce(float32[4,8], sum)` or `send(float32[4], dst=1, tag=0)`. */
  call: string;
  bytes: number;
  /** Group ranks the call exchanges data with (all others for collectives). */
  peers: readonly number[];
  /** Microseconds since the epoch (performance.timeOrigin + performance.now()), comparable across threads. */
  startUs: number;
  endUs: number;
  status: CallStatus;
  error?: string;
  site?: CapturedSite;
}

/** A plain, cloneable copy: what dumps and trace files hold. */
export interface CallEntry extends Omit<CallRecord, 'site' | 'peers'> {
  peers: number[];
  site?: string;
}

/** performance.timeOrigin, read once: its getter is not free, and it never changes within a thread. */
const TIME_ORIGIN_MS = performance.timeOrigin;

export function nowUs(): number {
  return epochMs(performance.now()) * 1000;
}

/**
 * A performance.now() reading as milliseconds since the epoch, comparable
 * across threads: the debugging tools' one clock (the status rows, the
 * snapshots and the reports compare each other's times).
 */
export function epochMs(performanceNow: number): number {
  return TIME_ORIGIN_MS + performanceNow;
}

export function epochNowMs(): number {
  return epochMs(performance.now());
}

export function callName(r: { call: string; seq: number; group: string }): string {
  return r.seq >= 0 ? `${r.call} #${r.seq} on group "${r.group}"` : `${r.call} on group "${r.group}"`;
}

export function formatDuration(us: number): string {
  if (us < 1000) return `${us.toFixed(0)} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

/** One line per entry, oldest first: `#17 allReduce(float32[4,8], sum) on group "tp": ok in 38 µs`. */
export function formatEntries(entries: readonly CallEntry[], now = nowUs()): string[] {
  return entries.map((e) => {
    const outcome =
      e.status === 'pending'
        ? `pending for ${formatDuration(now - e.startUs)}`
        : `${e.status} in ${formatDuration(e.endUs - e.startUs)}${e.error ? `: ${e.error.split('\n')[0]}` : ''}`;
    return `${callName(e)}: ${outcome}${e.site ? ` [at ${e.site}]` : ''}`;
  });
}
