/**
 * A group's calls as the rank's debugging monitor tracks them (debug/): each
 * call begins a record on the status board with the peers it waits for,
 * ends it as it settles, and a failure that is a disagreement between ranks
 * gets both ranks' call sites. A group makes a CallTracker only where the
 * monitor tracks calls; without one its calls pay for none of this.
 */
import type { CallRecord } from '../debug/call-record.ts';
import { formatSite } from '../debug/call-site.ts';
import type { HangFocus } from '../debug/hang-report.ts';
import type { RankMonitor } from '../debug/monitor.ts';
import { CollectiveMismatchError } from '../runtime/errors.ts';
import {
  clockNow,
  firstWaitReading,
  lastWaitReading,
  markWaitClock,
  waitClockRead,
} from '../runtime/wait.ts';
import { type CallDebug, CallMismatchError, PEER_CHECK_MS } from './backend.ts';
import type { OpName, OpSpec, RawRoles } from './ops.ts';
import type { Signed } from './recent-signatures.ts';

/** What the monitor is told of a group (a ThreadGroup's GroupInfo). */
export interface TrackedGroup {
  readonly id: string;
  readonly name: string;
  readonly ranks: readonly number[];
  readonly globalRank: number;
  readonly peerCheckMs?: number;
}

export class CallTracker {
  readonly #monitor: RankMonitor;
  readonly #group: TrackedGroup;
  /** The group's code on the status board. */
  readonly #groupCode: number;
  /** Global ranks of the other members: every collective's peers (shared, not copied per call). */
  readonly #others: readonly number[];
  readonly #peerLists: (readonly number[])[] = [];

  constructor(monitor: RankMonitor, group: TrackedGroup) {
    this.#monitor = monitor;
    this.#group = group;
    this.#groupCode = monitor.registerGroup(group.id, group.name);
    this.#others = Object.freeze(group.ranks.filter((r) => r !== group.globalRank));
  }

  /** A numbered call that failed its local checks: on the board as one that never started. */
  failedToStart(seq: number, op: OpName, error: unknown): void {
    this.#monitor.failedToStart(this.#groupCode, seq, op, error);
  }

  track(spec: OpSpec, seq: number, signed: Signed, roles: RawRoles | undefined): TrackedCall {
    const group = this.#group;
    const peer = spec.peerRole === undefined ? undefined : roles?.[spec.peerRole];
    const record = this.#monitor.begin(
      group.name,
      this.#groupCode,
      group.ranks.length,
      seq,
      spec.name,
      signed.label ?? signed.signature,
      signed.bytes,
      // A receive from any rank waits on every other member.
      spec.p2p && peer !== undefined ? this.#peerList(peer as number) : this.#others,
    );
    return new TrackedCall(this.#monitor, record, spec.code, group, group.peerCheckMs ?? PEER_CHECK_MS);
  }

  /** [the global rank of group rank `peer`], made once per peer: a point-to-point call's peers. */
  #peerList(peer: number): readonly number[] {
    this.#peerLists[peer] ??= Object.freeze([this.#group.ranks[peer]]);
    return this.#peerLists[peer];
  }
}

/** A call as the rank's monitor tracks it; its hang-report focus is made only when a report asks. */
export class TrackedCall implements CallDebug {
  /** The synchronous waits' clock when the call started (see markWaitClock). */
  readonly #clockMark = markWaitClock();

  constructor(
    readonly monitor: RankMonitor,
    readonly record: CallRecord,
    /** The op's code on the status board. */
    readonly opCode: number,
    readonly group: TrackedGroup,
    readonly peerCheckMs: number,
  ) {}

  /**
   * The call completed as it returned: its times are its waits' first and
   * last clock readings, or, where it waited for nothing, one reading now
   * (it took a microsecond or so).
   */
  endedAtOnce(): void {
    const started = this.#startedMs();
    this.monitor.endAtOnce(
      this.record,
      started,
      waitClockRead(this.#clockMark) ? lastWaitReading() : started,
      this.opCode,
    );
  }

  /** The call goes on, since its start. */
  running(): void {
    this.monitor.running(this.record, this.#startedMs());
  }

  /** `outcome`, recorded on the board as it settles. */
  watch<T>(outcome: Promise<T>): Promise<T> {
    return outcome.then(
      (value) => {
        this.monitor.end(this.record);
        return value;
      },
      (error) => this.#failed(error),
    );
  }

  /** `name` (the call's name in the ledger) with where it was called, where known. */
  describe(name: string): string {
    const site = this.record.site === undefined ? undefined : formatSite(this.record.site);
    return site === undefined ? name : `${name} (called at ${site})`;
  }

  /** When the call started: its waits' first clock reading, or, where it waited for nothing, now. */
  #startedMs(): number {
    return waitClockRead(this.#clockMark) ? firstWaitReading() : clockNow();
  }

  /** Records the failure; a disagreement between ranks gets both call sites. */
  async #failed(error: unknown): Promise<never> {
    const { monitor, record } = this;
    monitor.end(record, error);
    if (error instanceof CollectiveMismatchError) {
      const sites = [siteLine(monitor.rank, record)];
      // The peer is known when this rank saw the mismatch, or when a point-to-point peer reported it.
      const peer =
        error instanceof CallMismatchError ? error.peerRank : record.seq < 0 ? record.peers[0] : undefined;
      if (peer !== undefined) {
        const peerSite = await monitor.peerSite(peer, this.group.id, record.seq);
        if (peerSite) sites.push(`  rank ${peer} called it at ${peerSite}`);
      }
      error.message += `\n${sites.join('\n')}`;
    }
    throw error;
  }

  get focus(): HangFocus {
    const group = this.group;
    return { groupId: group.id, groupName: group.name, seq: this.record.seq, members: group.ranks };
  }
}

function siteLine(rank: number, record: CallRecord): string {
  if (record.site === undefined) {
    return `  rank ${rank}: no call site (DebugOptions.callSites is off, or its time budget was spent on earlier calls)`;
  }
  return `  rank ${rank} called it at ${formatSite(record.site) ?? '(no frame outside tensorcomm)'}`;
}
