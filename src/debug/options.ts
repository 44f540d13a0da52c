/**
 * Debugging options of a job: what every rank checks and records. They are
 * resolved once (given options over environment variables) in the launcher,
 * so every rank of a job agrees on them: the fingerprint exchange of rooted
 * calls only works when all ranks do it.
 */
import { resolveTracePath } from './trace.ts';

export interface DebugOptions {
  /**
   * Fingerprint check (default true): rooted and pairwise collectives start
   * with an exchange that compares every rank's call, so a rank that disagrees
   * on op, root, shapes, dtypes or order fails every rank at once. allReduce,
   * allGather and reduceScatterTensor compare on their data exchange and pay nothing.
   * Off, together with flightRecorderSize 0 and no trace, calls do no debugging
   * work at all (no status, no hang report, no fast failure when a peer left).
   * Env: TENSORCOMM_CHECKS=0|1.
   */
  checks?: boolean;
  /**
   * Capture the user's call site of each call that does not complete as it
   * returns (the ones that can mismatch, fail or hang), for mismatch errors and
   * hang reports (default true). Capturing costs microseconds, so it is held to
   * 0.5% of the rank's time: in hot loops of tiny calls some calls have no site.
   * Env: TENSORCOMM_CALL_SITES=0|1.
   */
  callSites?: boolean;
  /** Entries of the per-rank flight recorder ring (default 64; 0 turns it off). Env: TENSORCOMM_FLIGHT_RECORDER=<n>. */
  flightRecorderSize?: number;
  /**
   * Record every communication call and write a Chrome trace / Perfetto JSON
   * file: a path ending in `.json`, or a directory that gets a new file per job.
   * Env: TENSORCOMM_TRACE=<path or dir>.
   */
  trace?: string;
  /**
   * Also write every timeout's hang report to a file in this directory (the
   * error carries its path): what process ranks want, as their errors may be
   * lost with the process. Env: TENSORCOMM_HANG_REPORT_DIR=<dir>.
   */
  hangReportDir?: string;
}

export type ResolvedDebugOptions = Required<Omit<DebugOptions, 'trace' | 'hangReportDir'>> & {
  trace: string | undefined;
  hangReportDir: string | undefined;
};

/** For a launcher: the options every rank of the job gets, the trace directory turned into the job's file. */
export function resolveJobDebug(given: DebugOptions | undefined, where: string): ResolvedDebugOptions {
  const resolved = resolveDebugOptions(given, process.env, `${where}: debug`);
  return resolved.trace === undefined ? resolved : { ...resolved, trace: resolveTracePath(resolved.trace) };
}

export const DEFAULT_FLIGHT_RECORDER_SIZE = 64;
const MAX_FLIGHT_RECORDER_SIZE = 1 << 20;

function path(value: unknown, name: string, where: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') {
    throw new RangeError(`${where}: ${name} must be a file or directory path, got ${String(value)}`);
  }
  return value;
}

function flag(value: unknown, name: string, where: string): boolean | undefined {
  if (value === undefined || typeof value === 'boolean') return value;
  if (value === '0' || value === 'false') return false;
  if (value === '1' || value === 'true') return true;
  throw new RangeError(
    `${where}: ${name} must be true/false (or 0/1 in the environment), got ${String(value)}`,
  );
}

function entries(value: unknown, name: string, where: string): number | undefined {
  if (value === undefined) return undefined;
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (!Number.isSafeInteger(n) || (n as number) < 0 || (n as number) > MAX_FLIGHT_RECORDER_SIZE) {
    throw new RangeError(
      `${where}: ${name} must be an integer in 0..${MAX_FLIGHT_RECORDER_SIZE}, got ${String(value)}`,
    );
  }
  return n as number;
}

/** Options given in code win over the environment; unknown keys and bad values are errors naming them. */
export function resolveDebugOptions(
  given: DebugOptions | undefined,
  env: NodeJS.ProcessEnv = process.env,
  where = 'debug options',
): ResolvedDebugOptions {
  const known = new Set(['checks', 'callSites', 'flightRecorderSize', 'trace', 'hangReportDir']);
  for (const key of Object.keys(given ?? {})) {
    if (!known.has(key))
      throw new RangeError(`${where}: unknown option "${key}" (known: ${[...known].join(', ')})`);
  }
  const trace = path(given?.trace ?? (env.TENSORCOMM_TRACE || undefined), 'trace', where);
  const hangReportDir = path(
    given?.hangReportDir ?? (env.TENSORCOMM_HANG_REPORT_DIR || undefined),
    'hangReportDir',
    where,
  );
  return {
    checks:
      flag(given?.checks, 'checks', where) ?? flag(env.TENSORCOMM_CHECKS, 'TENSORCOMM_CHECKS', where) ?? true,
    callSites:
      flag(given?.callSites, 'callSites', where) ??
      flag(env.TENSORCOMM_CALL_SITES, 'TENSORCOMM_CALL_SITES', where) ??
      true,
    flightRecorderSize:
      entries(given?.flightRecorderSize, 'flightRecorderSize', where) ??
      entries(env.TENSORCOMM_FLIGHT_RECORDER, 'TENSORCOMM_FLIGHT_RECORDER', where) ??
      DEFAULT_FLIGHT_RECORDER_SIZE,
    trace,
    hangReportDir,
  };
}
