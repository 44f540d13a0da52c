/**
 * Where V8 has Maglev on (Node 24 and later), a rank's small calls reach
 * TurboFan 3,000 calls into a function; the call path is long, so its
 * functions tier up one after another over a job's first tens of thousands
 * of round trips, each compile a background thread that takes a core from a
 * spinning rank where ranks fill the cores, so small calls' times jump about
 * long after Node 20 and 22, without Maglev, have settled. Tiering up after
 * 1,000 calls ends it early in the job (bench/node-versions.ts shows it on
 * the machine at hand). The flag is the process's: its other code tiers up
 * sooner too. A flag the user set on the command line or in NODE_OPTIONS stays.
 * A launcher sets it before its first rank thread starts (spawn-threads.ts),
 * and a process rank before its first chunk compiles (script-chunk-loader.ts),
 * since V8 takes a code cache only under the flags it was made with: set by
 * the ranks themselves, after their chunks had loaded, it made every later
 * process reject the bundle's caches and compile the library from source.
 */
import { setFlagsFromString } from 'node:v8';

const FLAG = 'invocation-count-for-turbofan';
const CALLS_BEFORE_TURBOFAN = 1_000;
/** V8 13 (Node 24) is the first with Maglev on by default. */
const FIRST_V8_WITH_MAGLEV = 13;

let tuned = false;

/** The flag a rank sets for its process, or undefined where it leaves V8's tiering as it is. */
export function rankTieringFlag(
  v8Version = process.versions.v8,
  userFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`,
): string | undefined {
  if (Number.parseInt(v8Version, 10) < FIRST_V8_WITH_MAGLEV) return undefined;
  if (userFlags.includes(FLAG) || userFlags.includes(FLAG.replaceAll('-', '_'))) return undefined;
  return `--${FLAG}=${CALLS_BEFORE_TURBOFAN}`;
}

/** Sets the rank tiering flag once per process (V8 reads it at each tier-up decision, in every thread). */
export function tuneRankTiering(): void {
  if (tuned) return;
  tuned = true;
  const flag = rankTieringFlag();
  if (flag !== undefined) setFlagsFromString(flag);
}
