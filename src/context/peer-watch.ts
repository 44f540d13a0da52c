/**
 * Ranks that no launcher supervises (started by torchrun, mpirun, srun or by
 * hand) watch the other ranks of their node: a process that is gone (killed,
 * crashed, or exited with its context still open, whatever its exit code)
 * aborts the node's job directory, which wakes every pending wait of the
 * node's ranks with an error naming it, within a second instead of at the
 * collective timeout. Ranks of other nodes learn it from their network
 * connections to it closing.
 */
import { readFileSync } from 'node:fs';
import { describeEarlyExit, readEarlyExit } from '../debug/early-exit.ts';
import { abortJob } from '../file-store/index.ts';

const WATCH_INTERVAL_MS = 500;

/**
 * A zombie (exited, not yet reaped by the engine that started it: torchrun
 * polls its workers only every few seconds) still answers kill(pid, 0), but
 * /proc says it is dead; where there is no /proc, kill decides alone.
 */
function zombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may hold any character.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: a process of another user holds the pid now; ours is gone too, but only ESRCH says so for sure.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  return !zombie(pid);
}

/** How a peer that is gone left: its own record when it exited with its context open, else what its absence says. */
function howItLeft(dir: string, rank: number): string {
  const early = readEarlyExit(dir, rank);
  return early
    ? describeEarlyExit(early)
    : 'exited before the job ended, recording no exit: killed by a signal, or crashed';
}

export interface PeerWatch {
  stop(): void;
  /**
   * The first watched peer that is gone or leaving (its exit record is written just before its
   * process ends), as messages name it; undefined while every one runs. Asked afresh, not from
   * the last poll: a rank that learnt of a peer's exit from its status row may ask sooner.
   */
  gone(): string | undefined;
}

/** Watches `peers` (rank and pid) until stopped: the first one gone aborts the node's job. */
export function watchNodePeers(
  dir: string,
  peers: ReadonlyArray<{ rank: number; pid: number }>,
  names: readonly string[],
): PeerWatch {
  const describe = (p: { rank: number; pid: number }) =>
    `rank ${p.rank} (${names[p.rank]}, pid ${p.pid}) ${howItLeft(dir, p.rank)}`;
  // Its exit record comes a moment before the process is gone: either says it left.
  const firstGone = () => peers.find((p) => readEarlyExit(dir, p.rank) !== undefined || !alive(p.pid));
  const timer = setInterval(() => {
    const lost = firstGone();
    if (!lost) return;
    clearInterval(timer);
    abortJob(dir, { message: describe(lost), failedRank: lost.rank });
  }, WATCH_INTERVAL_MS);
  timer.unref();
  return {
    stop: () => clearInterval(timer),
    gone: () => {
      const lost = firstGone();
      return lost && describe(lost);
    },
  };
}
