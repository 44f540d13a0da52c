/**
 * Whether a process rank still answers. A rank's status row says what it was
 * doing when it last wrote it; a rank that was stopped (SIGSTOP, a debugger,
 * Ctrl-Z) or whose event loop is stuck in synchronous code keeps saying so.
 * Every process rank therefore touches its row on a timer (a heartbeat), and
 * a hang report shows a row not touched for a while as not responding, with
 * the time since it was last seen, instead of as a call still in progress.
 */
import type { RankStatus } from './status-board.ts';

/** How often a process rank touches its status row. */
export const HEARTBEAT_MS = 500;

/** Missed heartbeats after which a rank is shown as not responding (generous: a loaded machine delays timers). */
export const NOT_RESPONDING_MS = 3_000;

/**
 * Milliseconds since the rank was last seen, when that is long enough to call it not responding;
 * `now` is Date.now(), the clock `seen` is on.
 */
export function silentFor(status: RankStatus, now: number): number | undefined {
  if (status.seen === undefined) return undefined;
  const silent = now - status.seen;
  return silent >= NOT_RESPONDING_MS ? silent : undefined;
}
