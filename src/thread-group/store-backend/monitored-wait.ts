/**
 * The slow wait of a call on shared words (the group region, the mailboxes):
 * parked on the word until it is ready or the call's deadline passes, and,
 * when the call is monitored, woken every PEER_CHECK_MS to say whom it waits
 * for and to fail at once when one of them failed this call or left.
 */
import type { AbortWord } from '../../runtime/abort-word.ts';
import { CommTimeoutError } from '../../runtime/errors.ts';
import { waitForWord } from '../../runtime/wait.ts';
import type { CallInfo, GroupView } from '../backend.ts';
import { departedError, peerFailureError, timeoutError } from './call-failure.ts';

/** A slow wait looks at its peers' status this often, so a peer that left fails it at once. */
const PEER_CHECK_MS = 100;

export interface MonitoredWait {
  group: GroupView;
  call: CallInfo;
  abort: AbortWord | undefined;
  /** Absolute deadline in performance.now() milliseconds. */
  deadline: number;
  /** Whom the call waits for, in words (`group rank 1 (global rank 1)`). */
  waitingFor: () => string;
  /** The group ranks it waits for, whose status a monitored wait checks. */
  waitedFor?: () => readonly number[];
  /** See WaitOptions.blockMs. */
  blockMs?: number;
}

export async function waitMonitored(
  words: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  wait: MonitoredWait,
): Promise<void> {
  const { group, call, deadline, waitingFor, waitedFor } = wait;
  const what = () => `waiting for ${waitingFor()}`;
  const debug = call.debug;
  for (;;) {
    const sliceEnd = debug && waitedFor ? Math.min(deadline, performance.now() + PEER_CHECK_MS) : deadline;
    try {
      await waitForWord(words, index, ready, {
        deadline: sliceEnd,
        abort: wait.abort,
        describe: what,
        blockMs: wait.blockMs,
      });
      return;
    } catch (error) {
      if (!(error instanceof CommTimeoutError)) throw error;
      if (sliceEnd >= deadline) throw timeoutError(group, call, what());
    }
    if (!debug || !waitedFor) continue;
    // A peer may answer and leave within one slice: what it left behind counts first.
    if (ready(Atomics.load(words, index))) return;
    debug.monitor.waiting(debug.record, waitingFor());
    for (const p of waitedFor()) {
      const peer = group.ranks[p];
      const failure = peerFailureError(group, call, debug, peer);
      if (failure) throw failure;
      const departure = debug.monitor.departure(peer);
      if (departure !== undefined) throw departedError(group, call, debug, peer, departure);
    }
  }
}
