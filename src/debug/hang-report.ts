/**
 * The hang report: every rank's state read from the StatusBoard, as one rank
 * sees it when a wait of its own timed out (or on demand). For a call that
 * timed out it first says which members have not arrived at it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { epochNowMs, formatDuration, opName } from './call-record.ts';
import { silentFor } from './liveness.ts';
import {
  type CallMark,
  departureNote,
  RankState,
  type RankStatus,
  type StatusBoard,
} from './status-board.ts';

export interface HangFocus {
  groupId: string;
  groupName: string;
  seq: number;
  /** Global ranks of the group's members. */
  members: readonly number[];
}

function groupOf(status: RankStatus, code: number): { id: string; name: string } | undefined {
  return status.snapshot?.groups[code];
}

function markText(status: RankStatus, mark: CallMark): string {
  const op = opName(mark.op) ?? 'a call';
  const group = groupOf(status, mark.group)?.name ?? `#${mark.group}`;
  const seq = mark.seq >= 0 ? ` #${mark.seq}` : '';
  return `${op}${seq} on group "${group}"`;
}

function ago(at: number, now: number): string {
  return `${formatDuration(Math.max(0, now - at) * 1000)} ago`;
}

/** Whether the rank has reached call `seq` of the focus group, by its snapshot and its latest marks. */
function arrived(status: RankStatus, focus: HangFocus): boolean {
  const snap = status.snapshot;
  const inPending = snap?.pending.some(
    (c) => c.seq === focus.seq && snap.groups[c.group]?.id === focus.groupId,
  );
  if (inPending) return true;
  return [status.started, status.done].some(
    (m) => m.at > 0 && groupOf(status, m.group)?.id === focus.groupId && m.seq >= focus.seq,
  );
}

/** `now` on the debugging tools' clock (epochNowMs), `wallNow` Date.now(): the clock a row's `seen` is on. */
function rankLine(status: RankStatus, now: number, wallNow: number): string[] {
  const head = `rank ${status.rank}:`;
  const last =
    status.done.at > 0
      ? `last completed ${markText(status, status.done)} ${ago(status.done.at, now)}`
      : 'no call completed yet';
  if (status.state === RankState.notStarted) return [`${head} not started`];
  if (status.state === RankState.exited) {
    return [`${head} ${departureNote(status)}; ${last}`];
  }
  const snap = status.snapshot;
  // A row nobody touched for a while says what the rank did when it stopped answering, not what it does.
  // Its `seen` is the wall clock's (a file's modification time), which the process's performance clock
  // drifts from as the process runs (80 ms in a test process of a few minutes): compared with its own.
  const silent = silentFor(status, wallNow);
  const who =
    silent === undefined
      ? head
      : `${head} not responding, last seen ${formatDuration(silent * 1000)} ago (stopped, or its event loop is blocked); as last seen:`;
  // The snapshot is fresh when written after the rank's latest call started.
  const fresh = snap !== undefined && snap.at >= status.started.at;
  if (status.pending <= 0) return [`${who} running its own code (in no call); ${last}`];
  if (!fresh || snap.pending.length === 0) {
    return [`${who} in ${markText(status, status.started)} since ${ago(status.started.at, now)}; ${last}`];
  }
  const lines = [`${who} ${status.pending} call(s) pending; ${last}`];
  for (const c of snap.pending) {
    const group = snap.groups[c.group]?.name ?? `#${c.group}`;
    const seq = c.seq >= 0 ? ` #${c.seq}` : '';
    const waiting = c.waitingFor ? `, waiting for ${c.waitingFor}` : '';
    lines.push(
      `    ${c.call}${seq} on group "${group}" for ${ago(c.since, now).replace(' ago', '')}${waiting}` +
        (c.site ? ` (called at ${c.site})` : ''),
    );
  }
  return lines;
}

export function describeRanks(board: StatusBoard, focus?: HangFocus): string {
  const now = epochNowMs();
  const wallNow = Date.now();
  const statuses = Array.from({ length: board.worldSize }, (_, r) => board.read(r));
  const lines: string[] = [];
  // A point-to-point call has no number to arrive at: the lines of its peer say where that one is.
  if (focus && focus.seq >= 0) {
    const missing = focus.members.filter((r) => !arrived(statuses[r], focus));
    lines.push(
      missing.length > 0
        ? `ranks that have not arrived at call #${focus.seq} on group "${focus.groupName}": ${missing.join(', ')}`
        : `every member of group "${focus.groupName}" has arrived at call #${focus.seq}`,
    );
  }
  for (const s of statuses) lines.push(...rankLine(s, now, wallNow));
  return lines.join('\n');
}

/** Writes a hang report to `dir` (created if needed) as `hang-rank<r>-<time>.txt`; returns the file's path. */
export function writeHangReport(dir: string, rank: number, report: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `hang-rank${rank}-${Date.now()}.txt`);
  writeFileSync(file, `${report}\n`);
  return file;
}

const HEADING = 'hang report (rank ';

/** The first line of a timeout's report, as the rank that waited `waited` writes it. */
export function hangReportHeading(rank: number, waited: string): string {
  return `${HEADING}${rank}, after waiting ${waited}):`;
}

/**
 * Messages of several ranks of one job, each hang report but the first cut:
 * every report describes every rank, so one says it all, and N copies bury it.
 */
export function dropRepeatedHangReports(
  messages: ReadonlyArray<{ rank: number; message: string }>,
): string[] {
  let shownBy: number | undefined;
  return messages.map(({ rank, message }) => {
    const at = message.indexOf(`\n${HEADING}`);
    if (at < 0) return message;
    if (shownBy === undefined) {
      shownBy = rank;
      return message;
    }
    return `${message.slice(0, at)}\n(hang report: see rank ${shownBy}'s above)`;
  });
}
