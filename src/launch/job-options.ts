/** What spawnThreads and launchProcesses both accept about a job, checked the same way for both. */
import { dropRepeatedHangReports } from '../debug/hang-report.ts';
import { JobFailedError, type TensorcommError } from '../runtime/errors.ts';
import { type Device, parseDevice } from '../tensor/dtype.ts';

export interface JobShapeOptions {
  /**
   * Each rank's worker name, one per rank, for p2p messages between named workers
   * (`ctx.collective`; see the [P2P guide](../../docs/guides/p2p-and-compression.md)).
   *
   * @defaultValue `rank-0`, `rank-1`, …
   */
  names?: string[];
  /**
   * Each rank's device, one per rank: `'cpu'`, or `'cuda:N'` for GPU N (`ctx.device`). Ranks on distinct
   * GPUs talk over NCCL; several ranks may share one GPU, and then talk through shared memory (see the
   * [GPU guide](../../docs/guides/gpus.md)).
   *
   * @defaultValue every rank on `'cpu'`
   */
  devices?: Device[];
  /**
   * Whole-job timeout in milliseconds: past it every rank still running fails with a `CommTimeoutError`,
   * the job is aborted and the promise rejects.
   *
   * @defaultValue none: the job may run as long as its calls make progress
   */
  timeoutMs?: number;
  /**
   * Default timeout in milliseconds of each collective, p2p call and store wait inside the job (a call's own
   * `timeoutMs` overrides it). A call that runs past it fails with a `CommTimeoutError` saying which ranks
   * did not arrive (see [hang reports](../../docs/guides/debugging.md#hang-reports)).
   *
   * @defaultValue `timeoutMs` when given, else 300 000 (5 minutes)
   */
  collectiveTimeoutMs?: number;
  /**
   * Milliseconds the other ranks get to unwind (see their `RankFailedError`, close, report) after a rank
   * fails or the job is aborted, before they are stopped.
   *
   * @defaultValue 2000
   */
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

/**
 * A RankFailedError says another rank failed first: an echo of a root cause. Echoes can reach the launcher
 * before their cause does (a peer hears of the failure within the call it shares with the failing rank,
 * while that rank is still unwinding), so arrival order alone would print an echo first. A revived rank
 * error is a plain Error with the code, hence the test on `code`, not the class.
 */
const isEcho = (error: Error) => (error as Partial<TensorcommError>).code === 'ERR_TC_RANK_FAILED';

/** The job's failure: the failures root causes first (in the order they came), then their echoes. */
export function jobFailure(failures: readonly RankFailure[], names: readonly string[]): JobFailedError {
  const ordered = [...failures.filter((f) => !isEcho(f.error)), ...failures.filter((f) => isEcho(f.error))];
  return new JobFailedError(describeFailures(ordered, names), ordered);
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
