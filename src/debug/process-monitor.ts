/**
 * The seam for process ranks (launchProcesses / initProcess): what a launched
 * rank calls before building its context so its calls are monitored like a
 * thread rank's, with the status rows as files in the job's directory.
 *
 * The launcher's side: resolve the options once with `resolveJobDebug` and
 * pass `trace` to the ranks as TENSORCOMM_TRACE (a .json file, so every rank
 * writes its part beside the same path); after every rank exited, call
 * `mergeTraceParts(trace, worldSize)`.
 *
 * While the rank runs, its row has a heartbeat (liveness.ts); a process that
 * exits before the rank left its main function records how (early-exit.ts).
 */
import { describeEarlyExit, recordEarlyExit } from './early-exit.ts';
import { FileStatusBoard } from './file-status-board.ts';
import { RankMonitor, rankMonitor, setRankMonitor } from './monitor.ts';
import { type DebugOptions, resolveDebugOptions } from './options.ts';

/**
 * Installs this process's rank monitor, its status rows in `jobDir` (a FileStatusBoard, which a
 * job spanning nodes shares with the other nodes' ranks); hang reports also go to `defaultReportDir`
 * (`jobDir` unless given) unless the options or TENSORCOMM_HANG_REPORT_DIR say elsewhere.
 */
export function installProcessMonitor(
  rank: number,
  worldSize: number,
  jobDir: string,
  given?: DebugOptions,
  names: readonly string[] = [],
  /** Where hang reports go when neither the options nor TENSORCOMM_HANG_REPORT_DIR say. */
  defaultReportDir: string = jobDir,
): RankMonitor {
  const options = resolveDebugOptions(given, process.env, 'initProcess: debug');
  const board = new FileStatusBoard(jobDir, worldSize, rank);
  const monitor = new RankMonitor(
    rank,
    board,
    {
      ...options,
      hangReportDir: options.hangReportDir ?? defaultReportDir,
    },
    names,
  );
  setRankMonitor(monitor);
  // Once another monitor replaced this one (a test's), its rank is no longer this process's to speak for.
  const current = () => rankMonitor() === monitor && !monitor.closed;
  board.startHeartbeat(current);
  process.once('exit', (code) => {
    if (!current()) return;
    const exit = { code, calls: monitor.pendingCalls() };
    recordEarlyExit(jobDir, rank, exit);
    try {
      monitor.leave(`it ${describeEarlyExit(exit)}`);
    } catch {
      // The job directory is gone (its launcher ended the job): nobody is left to read the row.
    }
  });
  return monitor;
}
