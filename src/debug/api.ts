/**
 * The debugging API a rank calls on demand: its flight recorder, and every
 * rank's status (what a timeout's hang report shows), to print or to write
 * to a file.
 */

import { InvalidStateError } from '../runtime/errors.ts';
import { type CallEntry, formatEntries } from './call-record.ts';
import { writeHangReport as writeReportFile } from './hang-report.ts';
import { type RankMonitor, rankMonitor } from './monitor.ts';

function monitorOf(where: string): RankMonitor {
  const monitor = rankMonitor();
  if (!monitor)
    throw new InvalidStateError(`${where}: call it inside a rank (spawnThreads entry or launched process)`);
  return monitor;
}

/** This rank's most recent calls, oldest first (DebugOptions.flightRecorderSize of them). */
export function dumpFlightRecorder(): CallEntry[] {
  return monitorOf('dumpFlightRecorder').flightRecorder();
}

/** The flight recorder as text, one call per line. */
export function formatFlightRecorder(entries: readonly CallEntry[] = dumpFlightRecorder()): string {
  return formatEntries(entries).join('\n');
}

/** Every rank's state as this rank sees it: pending and last completed calls, where each rank is. */
export function describeRanks(): string {
  return monitorOf('describeRanks').describeRanks();
}

/**
 * Writes every rank's state and this rank's flight recorder to a file in `dir`
 * (`hang-rank<r>-<time>.txt`) and returns its path. Process ranks call this
 * when a wait times out, so the report outlives the job.
 */
export function writeHangReport(dir: string, report?: string): string {
  const monitor = monitorOf('writeHangReport');
  const text =
    report ??
    `${monitor.describeRanks()}\nflight recorder of rank ${monitor.rank}:\n${formatFlightRecorder(monitor.flightRecorder())}`;
  return writeReportFile(dir, monitor.rank, text);
}
