/**
 * The slow wait of a call on shared words (the group region, the mailboxes):
 * parked on the word until it is ready or the call's deadline passes, and,
 * when the call is monitored, woken every peerCheckMs to say whom it waits
 * for and to fail at once when one of them failed this call or left; or the
 * same watch kept by a timer over a wait that something else ends.
 */
import type { JobStop } from '../../runtime/abort-word.ts';
import { CommTimeoutError } from '../../runtime/errors.ts';
import { waitForWord } from '../../runtime/wait.ts';
import type { CallInfo, GroupView } from '../backend.ts';
import { departedError, peerFailureError, timeoutError } from './call-failure.ts';

export interface MonitoredWait {
  group: GroupView;
  call: CallInfo;
  abort: JobStop | undefined;
  /** Absolute deadline in performance.now() milliseconds. */
  deadline: number;
  /** Whom the call waits for, in words (`group rank 1 (global rank 1)`). */
  waitingFor: () => string;
  /** The group ranks it waits for, whose status a monitored wait checks. */
  waitedFor?: () => readonly number[];
  /** See WaitOptions.blockMs. */
  blockMs?: number;
  /** See WaitOptions.sleepers. */
  sleepers?: number;
  /** See WaitOptions.spun: for the first slice only. */
  spun?: boolean;
  /** See WaitOptions.park. */
  park?: (ms: number) => Promise<void>;
}

export async function waitMonitored(
  words: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  wait: MonitoredWait,
): Promise<void> {
  const { group, call, deadline, waitingFor } = wait;
  const what = () => `waiting for ${waitingFor()}`;
  for (let spun = wait.spun; ; spun = false) {
    const sliceEnd = sliceEndOf(wait);
    try {
      await waitForWord(words, index, ready, {
        deadline: sliceEnd,
        abort: wait.abort,
        describe: what,
        blockMs: wait.blockMs,
        sleepers: wait.sleepers,
        spun,
        park: wait.park,
      });
      return;
    } catch (error) {
      if (!(error instanceof CommTimeoutError)) throw error;
      if (sliceEnd >= deadline) throw timeoutError(group, call, what());
    }
    // A peer may answer and leave within one slice: what it left behind counts first.
    const settled = () => ready(Atomics.load(words, index));
    if (settled()) return;
    const problem = peerProblem(wait, settled);
    if (problem) throw problem;
  }
}

/**
 * The same watch, kept by a timer, over a wait that something else ends (a
 * mailbox receive whose record another look at the ring hands over). At each
 * slice `ended()` takes a last look and says whether the wait ended; if not,
 * `fail` gets the job's abort (no word of this watch is notified for it), the
 * timeout, or the failure or departure of a peer waited for. Returns what
 * stops the watch.
 */
export function watchMonitored(
  wait: MonitoredWait,
  ended: () => boolean,
  fail: (error: Error) => void,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  // peerProblem's last look may end the wait, and so stop the watch, within the check.
  let stopped = false;
  const check = () => {
    if (ended()) return;
    const problem =
      wait.abort?.error() ??
      (performance.now() >= wait.deadline
        ? timeoutError(wait.group, wait.call, `waiting for ${wait.waitingFor()}`)
        : peerProblem(wait, ended));
    if (problem) fail(problem);
    else if (!stopped) schedule();
  };
  const schedule = () => {
    timer = setTimeout(check, Math.max(0, sliceEndOf(wait) - performance.now()));
  };
  schedule();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Where a slow wait next looks up: at the deadline, or sooner for a monitored call that watches its peers. */
function sliceEndOf(wait: MonitoredWait): number {
  const debug = wait.call.debug;
  return debug && wait.waitedFor
    ? Math.min(wait.deadline, performance.now() + debug.peerCheckMs)
    : wait.deadline;
}

/**
 * A monitored wait's look at its peers: whom it waits for, said to the monitor; a peer that failed
 * this call or left. `settled` takes a last look at the wait itself: whether it ended.
 */
function peerProblem(wait: MonitoredWait, settled: () => boolean): Error | undefined {
  const { group, call, waitingFor, waitedFor } = wait;
  const debug = call.debug;
  if (!debug || !waitedFor) return undefined;
  debug.monitor.waiting(debug.record, waitingFor());
  for (const p of waitedFor()) {
    const peer = group.ranks[p];
    const failure = peerFailureError(group, call, debug, peer);
    if (failure) return failure;
    const departure = debug.monitor.departure(peer);
    if (departure === undefined) continue;
    // Between the look at whom the wait waits for and this one, the peer may have made its part
    // of the call, seen the call complete and left (a descheduled thread gives it all the time it
    // needs). A rank leaves after all it did, so looked at again now, what it did shows.
    if (settled()) return undefined;
    if (waitedFor().includes(p)) return departedError(group, call, debug, peer, departure);
  }
  return undefined;
}
