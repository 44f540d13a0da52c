/**
 * Ranks that no launcher supervises (started by torchrun, mpirun, srun or by
 * hand) watch the other ranks of their node: a process that is gone (killed,
 * crashed) aborts the node's job directory, which wakes every pending wait
 * of the node's ranks with an error naming it, within a second instead of at
 * the collective timeout. Ranks of other nodes learn it from their network
 * connections to it closing.
 */
import { abortJob } from '../file-store/index.ts';

const WATCH_INTERVAL_MS = 500;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: a process of another user holds the pid now; ours is gone too, but only ESRCH says so for sure.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Watches `peers` (rank and pid) until the returned stop is called. */
export function watchNodePeers(
  dir: string,
  peers: ReadonlyArray<{ rank: number; pid: number }>,
  names: readonly string[],
): () => void {
  const timer = setInterval(() => {
    const lost = peers.find((p) => !alive(p.pid));
    if (!lost) return;
    clearInterval(timer);
    abortJob(dir, {
      message: `rank ${lost.rank} (${names[lost.rank]}, pid ${lost.pid}) exited before the job ended`,
      failedRank: lost.rank,
    });
  }, WATCH_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
