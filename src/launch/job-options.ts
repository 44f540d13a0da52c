/** What spawnThreads and launchProcesses both accept about a job, checked the same way for both. */
import { dropRepeatedHangReports } from '../debug/hang-report.ts';
import { type Device, parseDevice } from '../tensor/dtype.ts';

export interface JobShapeOptions {
  /** Worker names for p2p (default `rank-${i}`). */
  names?: string[];
  devices?: Device[];
  /** Whole-job timeout: past it every rank is aborted and the promise rejects. */
  timeoutMs?: number;
  /** Default timeout of each collective / store wait inside the job. */
  collectiveTimeoutMs?: number;
  /** How long ranks get to unwind after an abort before they are stopped. */
  graceMs?: number;
}

/** Every key of JobShapeOptions, for checkOptionKeys: the compiler keeps it complete. */
export const JOB_SHAPE_KEYS = {
  names: true,
  devices: true,
  timeoutMs: true,
  collectiveTimeoutMs: true,
  graceMs: true,
} as const satisfies Record<keyof JobShapeOptions, true>;

export const DEFAULT_COLLECTIVE_TIMEOUT_MS = 300_000;
export const DEFAULT_GRACE_MS = 2_000;
const MAX_WORLD_SIZE = 4096;

export interface CheckedJob {
  names: string[];
  devices: Device[];
  collectiveTimeoutMs: number;
  graceMs: number;
}

export function checkJobOptions(worldSize: number, options: JobShapeOptions, where: string): CheckedJob {
  if (!Number.isSafeInteger(worldSize) || worldSize < 1 || worldSize > MAX_WORLD_SIZE) {
    throw new RangeError(`${where}: worldSize must be an integer in 1..${MAX_WORLD_SIZE}, got ${worldSize}`);
  }
  const names = options.names ?? Array.from({ length: worldSize }, (_, i) => `rank-${i}`);
  if (names.length !== worldSize) {
    throw new RangeError(`${where}: names has ${names.length} entries for worldSize ${worldSize}`);
  }
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined)
    throw new RangeError(`${where}: worker name ${JSON.stringify(duplicate)} is used twice`);
  const devices = (options.devices ?? Array.from({ length: worldSize }, () => 'cpu' as const)).map((d) =>
    parseDevice(d, where),
  );
  if (devices.length !== worldSize) {
    throw new RangeError(`${where}: devices has ${devices.length} entries for worldSize ${worldSize}`);
  }
  for (const key of ['timeoutMs', 'collectiveTimeoutMs', 'graceMs'] as const) {
    const value = options[key];
    if (value !== undefined && !(value > 0))
      throw new RangeError(`${where}: ${key} must be positive, got ${value}`);
  }
  return {
    names,
    devices,
    collectiveTimeoutMs: options.collectiveTimeoutMs ?? options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS,
    graceMs: options.graceMs ?? DEFAULT_GRACE_MS,
  };
}

export type RankFailure = { rank: number; error: Error };

/**
 * Ends every rank still running with `message` (job timeout, launcher stopped): marks it settled, records
 * why, as the error `kind` makes of the text (CommTimeoutError for a timeout, LaunchError for a stop).
 */
export function failRunning(
  settled: boolean[],
  failures: RankFailure[],
  message: string,
  kind: (text: string) => Error,
): void {
  settled.forEach((done, rank) => {
    if (done) return;
    settled[rank] = true;
    failures.push({ rank, error: kind(`rank ${rank}: ${message}`) });
  });
}

export function jobTimeoutMessage(timeoutMs: number, settled: readonly boolean[]): string {
  const running = settled.flatMap((done, rank) => (done ? [] : [rank]));
  return `job timed out after ${timeoutMs} ms; ranks still running: ${running.join(', ')}`;
}

/** The first failure is the root cause; the others are usually its echoes. */
export function describeFailures(failures: readonly RankFailure[], names: readonly string[]): string {
  // Several ranks that timed out each carry a report of every rank: the first one is printed.
  const messages = dropRepeatedHangReports(
    failures.map(({ rank, error }) => ({ rank, message: error.message })),
  );
  const lines = failures.map(
    ({ rank, error }, i) => `  rank ${rank} (${names[rank]}): ${error.name}: ${messages[i]}`,
  );
  return `${failures.length} rank(s) failed: ${failures.map((f) => f.rank).join(', ')}\n${lines.join('\n')}`;
}
