/**
 * RankMonitor: what one rank knows and tells about its calls. ThreadGroup
 * reports every call's start and end here (a few stores on the fast path);
 * the monitor keeps the flight recorder and the trace, mirrors the rank's
 * state on the shared StatusBoard, and answers the questions a failing wait
 * asks: has the peer I wait for left? where did it make this call? where is
 * every rank now?
 */

import type { NetworkStats } from '../runtime/network-stats.ts';
import { RankLocal } from '../runtime/rank-local.ts';
import { removeItem } from '../runtime/remove-item.ts';
import { type CallEntry, type CallRecord, epochMs, epochNowMs, nowUs, opCode } from './call-record.ts';
import { formatSite, SiteBudget } from './call-site.ts';
import { FlightRecorder, toEntry } from './flight-recorder.ts';
import { describeRanks, type HangFocus, writeHangReport } from './hang-report.ts';
import type { ResolvedDebugOptions } from './options.ts';
import {
  departureNote,
  exitNote,
  type RankSnapshot,
  RankState,
  type SnapshotCall,
  type StatusBoard,
} from './status-board.ts';
import { writeTracePart } from './trace.ts';

/** A slow wait republishes the rank's snapshot at most this often. */
const SNAPSHOT_INTERVAL_MS = 100;
const KEPT_FAILURES = 4;
/**
 * How long a mismatch waits for the peer to publish the call it failed. The
 * peer sees the same mismatch and publishes at once, but on a loaded machine
 * (or a process peer still starting up) that can take longer than a few
 * hundred milliseconds; the wait ends as soon as the call appears, so only a
 * peer that never publishes it costs the whole wait, on an error path.
 */
const PEER_SITE_WAIT_MS = 2_000;
const MAX_TRACE_EVENTS = 1_000_000;

export class RankMonitor {
  readonly recorder: FlightRecorder;
  readonly #groups: Array<{ id: string; name: string }> = [];
  /** Calls begun and not ended, oldest first (an array: see removeItem). */
  readonly #pending: CallRecord[] = [];
  readonly #waitingFor = new WeakMap<CallRecord, string>();
  readonly #failed: SnapshotCall[] = [];
  readonly #trace: CallRecord[] | undefined;
  readonly #sites: SiteBudget | undefined;
  #traceDropped = 0;
  #snapshotAt = 0;
  #exit: string | undefined;
  /**
   * The rank's network bytes, for its trace part (the trace's per-rank network summary); set by its
   * context, which knows the store.
   */
  networkStats: (() => NetworkStats) | undefined;

  constructor(
    readonly rank: number,
    readonly board: StatusBoard,
    readonly options: ResolvedDebugOptions,
    /** Every rank's worker name, by global rank, for messages about peers. */
    readonly names: readonly string[] = [],
  ) {
    this.recorder = new FlightRecorder(options.flightRecorderSize);
    this.#trace = options.trace ? [] : undefined;
    this.#sites = options.callSites ? new SiteBudget() : undefined;
    board.setState(rank, RankState.running);
  }

  /**
   * Whether groups report their calls here. With checks off, no flight
   * recorder and no trace there is nothing to keep: calls skip the monitor
   * (and so peer checks and hang reports) entirely.
   */
  get tracksCalls(): boolean {
    const o = this.options;
    return o.checks || o.flightRecorderSize > 0 || o.trace !== undefined;
  }

  get worldSize(): number {
    return this.board.worldSize;
  }

  /** A code for the group in this rank's status row; its id and name go into the snapshot. */
  registerGroup(id: string, name: string): number {
    this.#groups.push({ id, name });
    this.publish();
    return this.#groups.length - 1;
  }

  /**
   * A call starts (its fields as CallRecord's; positional, so a call makes
   * one object here, its record). It goes on the status row and among the
   * pending calls only if it did not complete as it returned (running), or
   * with its end (endAtOnce): most small calls between threads complete at
   * once, and so cost no clock reading at their start.
   */
  begin(
    group: string,
    groupCode: number,
    groupSize: number,
    seq: number,
    op: string,
    call: string,
    bytes: number,
    peers: readonly number[],
  ): CallRecord {
    const record: CallRecord = {
      rank: this.rank,
      group,
      groupCode,
      groupSize,
      seq,
      op,
      call,
      bytes,
      peers,
      startUs: 0,
      endUs: 0,
      status: 'pending',
      site: undefined,
    };
    this.recorder.record(record);
    if (this.#trace) {
      if (this.#trace.length < MAX_TRACE_EVENTS) this.#trace.push(record);
      else this.#traceDropped++;
    }
    return record;
  }

  /** A call that did not complete as it returned: pending since `startedMs` (a performance.now() reading). */
  running(record: CallRecord, startedMs: number): void {
    // The user's call site, captured here (still within the call, so the user's frames are on the stack):
    // the calls that mismatch, fail or hang are the ones that did not complete as they returned.
    record.site = this.#sites?.capture();
    const at = epochMs(startedMs);
    record.startUs = at * 1000;
    this.#pending.push(record);
    this.board.callStarted(this.rank, record.seq, opCode(record.op), record.groupCode, at);
  }

  /** A call that completed as it returned, between two performance.now() readings; `op` its code, where the caller has it. */
  endAtOnce(record: CallRecord, startedMs: number, endedMs: number, op = opCode(record.op)): void {
    const started = epochMs(startedMs);
    const ended = epochMs(endedMs);
    record.startUs = started * 1000;
    record.endUs = ended * 1000;
    record.status = 'ok';
    this.board.callStarted(this.rank, record.seq, op, record.groupCode, started);
    this.board.callEnded(this.rank, record.seq, op, record.groupCode, ended);
  }

  /** A running call ends. */
  end(record: CallRecord, error?: unknown): void {
    const at = epochNowMs();
    record.endUs = at * 1000;
    removeItem(this.#pending, record);
    this.board.callEnded(this.rank, record.seq, opCode(record.op), record.groupCode, at);
    if (error === undefined) {
      record.status = 'ok';
      return;
    }
    record.status = 'failed';
    record.error = error instanceof Error ? error.message : String(error);
    this.#failed.push({
      ...this.#snapshotCall(record),
      failed: record.error.split('\n')[0],
      failedName: error instanceof Error ? error.name : 'Error',
    });
    if (this.#failed.length > KEPT_FAILURES) this.#failed.shift();
    this.publish();
  }

  /**
   * A call of group `groupCode` that failed its own checks before it began:
   * kept with the failed calls, so peers waiting for its values learn why
   * (peerFailure); it is not a call the flight recorder or trace saw run.
   */
  failedToStart(groupCode: number, seq: number, call: string, error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    this.#failed.push({
      group: groupCode,
      seq,
      call,
      since: nowUs() / 1000,
      failed: message.split('\n')[0],
      failedName: error instanceof Error ? error.name : 'Error',
    });
    if (this.#failed.length > KEPT_FAILURES) this.#failed.shift();
    this.publish();
  }

  /** A wait of `record` is slow: say what it waits for, so other ranks' reports can show it. */
  waiting(record: CallRecord, waitingFor: string): void {
    this.#waitingFor.set(record, waitingFor);
    if (epochNowMs() - this.#snapshotAt >= SNAPSHOT_INTERVAL_MS) this.publish();
  }

  /** Writes this rank's snapshot (pending calls with their sites) to its status row. */
  publish(): void {
    this.#snapshotAt = epochNowMs();
    const snapshot: RankSnapshot = {
      rank: this.rank,
      at: this.#snapshotAt,
      groups: this.#groups,
      pending: this.#pending.map((r) => this.#snapshotCall(r)),
      failed: this.#failed,
    };
    if (this.#exit !== undefined) snapshot.exit = this.#exit;
    this.board.writeSnapshot(this.rank, snapshot);
  }

  #snapshotCall(r: CallRecord): SnapshotCall {
    const call: SnapshotCall = { group: r.groupCode, seq: r.seq, call: r.call, since: r.startUs / 1000 };
    const site = formatSite(r.site);
    if (site) call.site = site;
    const waitingFor = this.#waitingFor.get(r);
    if (waitingFor) call.waitingFor = waitingFor;
    return call;
  }

  /** `rank 1 (rollout)`: a peer as messages name it; a default worker name (`rank-1`) adds nothing. */
  label(globalRank: number): string {
    const name = this.names[globalRank];
    return name === undefined || name === `rank-${globalRank}`
      ? `rank ${globalRank}`
      : `rank ${globalRank} (${name})`;
  }

  /**
   * How `globalRank` left, when it has left its main function; undefined while it runs. Its part in a
   * call may have come just before it left: only a look at the call after this read, which sees all
   * the rank did before leaving, says whether it will never make the call.
   */
  departure(globalRank: number): string | undefined {
    const status = this.board.read(globalRank);
    if (status.state !== RankState.exited) return undefined;
    return departureNote(status);
  }

  /** The error `globalRank` failed call `seq` of group `groupId` with, once it has reported it. */
  peerFailure(
    globalRank: number,
    groupId: string,
    seq: number,
  ): { name: string; message: string } | undefined {
    const snapshot = this.board.read(globalRank).snapshot;
    const failed = snapshot?.failed.find((c) => c.seq === seq && snapshot.groups[c.group]?.id === groupId);
    return failed?.failed === undefined
      ? undefined
      : { name: failed.failedName ?? 'Error', message: failed.failed };
  }

  /** Whether `globalRank` has started a call of group `groupId` after call `seq`: it is done with `seq`, whatever its outcome. */
  peerPast(globalRank: number, groupId: string, seq: number): boolean {
    const status = this.board.read(globalRank);
    const { started, snapshot } = status;
    return started.seq > seq && snapshot?.groups[started.group]?.id === groupId;
  }

  /** Where `globalRank` made call `seq` of group `groupId`, once it has reported it (waits briefly). */
  async peerSite(globalRank: number, groupId: string, seq: number): Promise<string | undefined> {
    const deadline = Date.now() + PEER_SITE_WAIT_MS;
    for (;;) {
      const snapshot = this.board.read(globalRank).snapshot;
      const calls = [...(snapshot?.failed ?? []), ...(snapshot?.pending ?? [])];
      // The newest match: point-to-point calls (seq -1) of a group all share the number.
      const match = calls.findLast((c) => c.seq === seq && snapshot?.groups[c.group]?.id === groupId);
      if (match) return match.site ?? 'no call site (callSites off, or its time budget spent)';
      if (Date.now() >= deadline || this.board.read(globalRank).state === RankState.exited) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** The status of every rank as this rank sees it; with a focus, who has not arrived at that call. */
  describeRanks(focus?: HangFocus): string {
    this.publish();
    return describeRanks(this.board, focus);
  }

  /** Writes a timeout's report to DebugOptions.hangReportDir, if set; returns the file's path. */
  saveHangReport(report: string): string | undefined {
    const dir = this.options.hangReportDir;
    return dir === undefined ? undefined : writeHangReport(dir, this.rank, report);
  }

  flightRecorder(): CallEntry[] {
    return this.recorder.dump();
  }

  /**
   * The rank left its main function (threw `failure`, when given): peers waiting for it fail at
   * once, told why, instead of timing out.
   */
  close(failure?: unknown): void {
    this.#leave(exitNote(failure));
  }

  /** Whether the rank has left its main function (close or leave). */
  get closed(): boolean {
    return this.#exit !== undefined;
  }

  /** The calls this rank started and has not finished, as messages name them (`barrier() call #0 on group "world"`). */
  pendingCalls(): string[] {
    return this.#pending.map((r) => {
      const seq = r.seq >= 0 ? ` call #${r.seq}` : '';
      return `${r.call}${seq} on group "${this.#groups[r.groupCode]?.name ?? r.group}"`;
    });
  }

  /**
   * The process is exiting without the rank having left its main function: `note` (`it exited
   * with code 0 …`) is what peers waiting for it are told, at once.
   */
  leave(note: string): void {
    this.#leave(note);
  }

  #leave(note: string): void {
    if (this.#exit !== undefined) return;
    this.#exit = note;
    this.publish();
    this.board.setState(this.rank, RankState.exited);
    if (this.options.trace && this.#trace) {
      const entries = this.#trace.map(toEntry);
      writeTracePart(this.options.trace, this.rank, entries, this.#traceDropped, this.networkStats?.());
    }
  }
}

const current = new RankLocal<RankMonitor | undefined>(() => undefined);

/** The monitor of the rank this thread (or process) runs as; set by whoever builds its context. */
export function setRankMonitor(monitor: RankMonitor | undefined): void {
  current.set(monitor);
}

export function rankMonitor(): RankMonitor | undefined {
  return current.get();
}
