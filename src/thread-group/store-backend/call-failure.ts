/**
 * How a call over a store explains its failures: the call and group it was,
 * whom it waited for, the two signatures of a mismatch, the hang report of a
 * monitored call that timed out. The keyed exchange and the shared region
 * both fail in these words, so a user sees the same error whichever path ran.
 */
import { formatDuration, formatEntries } from '../../debug/call-record.ts';
import { hangReportHeading } from '../../debug/hang-report.ts';
import { CommTimeoutError, RankFailedError } from '../../runtime/errors.ts';
import { type CallDebug, type CallInfo, CallMismatchError, type GroupView } from '../backend.ts';

const RECORDER_LINES_IN_REPORT = 8;

/** The call as messages name it, e.g. `barrier() call #3 on group "world"` or `recv(float32[4], src=1, tag=0) on …`. */
export function callWhere(call: CallInfo, group: GroupView): string {
  // Point-to-point calls are matched per stream, not numbered in the group's collective order;
  // their signature is only `p2p`, their label says what they are.
  const numbered = call.seq >= 0 ? ` call #${call.seq}` : '';
  const name = call.debug?.record.call ?? call.signature;
  return `${name}${numbered} on group "${group.name}"`;
}

/** Group ranks as messages name them: `group ranks 1, 2 (global ranks 3, 4)`. */
export function ranksText(group: GroupView, groupRanks: readonly number[]): string {
  const plural = groupRanks.length === 1 ? '' : 's';
  const global = groupRanks.map((p) => group.ranks[p]);
  return `group rank${plural} ${groupRanks.join(', ')} (global rank${plural} ${global.join(', ')})`;
}

/** This rank called `expected`, group rank `producer` called `theirs`, under the same call number. */
export function mismatchError(
  group: GroupView,
  call: CallInfo,
  expected: string,
  producer: number,
  theirs: string,
): CallMismatchError {
  return new CallMismatchError(
    `rank ${group.ranks[group.rank]} called ${expected} as call #${call.seq} on group ` +
      `"${group.name}", but rank ${group.ranks[producer]} called ${theirs} as call #${call.seq}`,
    group.ranks[producer],
  );
}

/** This rank expects `want` (e.g. `float32[4]`) from group rank `producer`, which sent `sent`. */
export function layoutMismatchError(
  group: GroupView,
  call: CallInfo,
  want: string,
  producer: number,
  sent: string,
): CallMismatchError {
  return new CallMismatchError(
    `${callWhere(call, group)}: rank ${group.ranks[group.rank]} expects ${want} from rank ` +
      `${group.ranks[producer]}, which sent ${sent}`,
    group.ranks[producer],
  );
}

/** Group rank `producer` failed this call locally and said why: its own error is the root cause, this one its echo. */
export function abandonedError(
  group: GroupView,
  call: CallInfo,
  producer: number,
  why: string,
): RankFailedError {
  return new RankFailedError(
    `${callWhere(call, group)}: group rank ${producer} failed this call: ${why}`,
    group.ranks[producer],
  );
}

/** The call timed out doing `what` (e.g. `waiting for group rank 1 (global rank 1)`), with the hang report. */
export function timeoutError(group: GroupView, call: CallInfo, what: string): CommTimeoutError {
  return new CommTimeoutError(
    `${callWhere(call, group)}: rank ${group.ranks[group.rank]} timed out after ${call.timeoutMs} ms ` +
      `${what}${hangReport(call)}`,
  );
}

/**
 * What a monitored call's slow wait learns of the peer (global rank) it waits
 * for: its error when it failed this very call, undefined while it may still come.
 */
export function peerFailureError(
  group: GroupView,
  call: CallInfo,
  debug: CallDebug,
  globalPeer: number,
): Error | undefined {
  if (call.seq < 0) return undefined;
  const failure = debug.monitor.peerFailure(globalPeer, debug.focus.groupId, call.seq);
  if (!failure) return undefined;
  const text = `${callWhere(call, group)}: rank ${globalPeer} failed this call: ${failure.message}`;
  if (failure.name === 'CollectiveMismatchError') return new CallMismatchError(text, globalPeer);
  return new RankFailedError(text, globalPeer);
}

/** The peer (global rank) left its main function and will never make this call. */
export function departedError(
  group: GroupView,
  call: CallInfo,
  debug: CallDebug,
  globalPeer: number,
  departure: string,
): RankFailedError {
  return new RankFailedError(
    `${callWhere(call, group)}: rank ${group.ranks[group.rank]} waited for ${debug.monitor.label(globalPeer)}, ` +
      `which will never make this call: ${departure}`,
    globalPeer,
  );
}

/** Where every rank is, and this rank's recent calls: appended to timeouts of monitored calls. */
function hangReport(call: CallInfo): string {
  const debug = call.debug;
  if (!debug) return '';
  const { monitor, focus } = debug;
  const recent = monitor.flightRecorder().slice(-RECORDER_LINES_IN_REPORT);
  const waited = formatDuration(call.timeoutMs * 1000);
  const report =
    `${hangReportHeading(monitor.rank, waited)}\n${monitor.describeRanks(focus)}` +
    `\nflight recorder of rank ${monitor.rank} (last ${recent.length} of ${monitor.recorder.recorded} calls):\n` +
    formatEntries(recent)
      .map((line) => `  ${line}`)
      .join('\n');
  const file = monitor.saveHangReport(report);
  return `\n${report}${file ? `\n(hang report written to ${file})` : ''}`;
}
