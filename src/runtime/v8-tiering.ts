/**
 * Where V8 has Maglev on (Node 24 and later), a rank's small calls reach
 * TurboFan only 10,000 (V8 13) or 16,000 (V8 14) calls into a function
 * (Maglev raises the 3,000 that `node --v8-options` lists); the call path is
 * long, so its functions tier up one after another over a job's first tens
 * of thousands of round trips, each compile a background thread that takes a
 * core from a spinning rank where ranks fill the cores, so small calls' times
 * jump about long after Node 20 and 22, without Maglev, have settled. Tiering
 * up after 1,000 calls ends it early in the job (bench/node-versions.ts shows
 * it on the machine at hand). The flag is the process's: its other code tiers
 * up sooner too. A flag the user set on the command line or in NODE_OPTIONS
 * stays.
 *
 * V8 takes a code cache only under the flags it was made with, and Node's
 * caches of its own built-in modules were made under V8's start-up flags: a
 * thread that starts under another flag compiles every built-in it loads
 * from source (Node keeps the result for the process's later threads). With
 * the flag set before a process's first rank threads started, every one of
 * them did, which made the first job of a process on Node 24 and 26 the
 * slowest to start. So rank threads start and load the library under V8's
 * own flags, and the ranks turn tiering on past their job's start-up barrier
 * (rank-context.ts), where its calls begin; once no job of the launcher
 * runs, V8 gets its own flags back (rankThreadsStarting). The code caches of
 * the library's chunks a rank thread loaded before are written under V8's
 * own flags too (script-chunk-loader.ts).
 *
 * A process rank keeps V8's own tiering. There the flag cost a fresh job's
 * small calls far more than it saved later: it brought the call path's
 * TurboFan compiles into a short job's first calls, on a core the process
 * needs to make them (where its node's ranks fill the cores, it compiles on
 * its own thread: launch/rank-v8-flags.ts). Between 2 processes on 2 cores,
 * the mean of a fresh job's first 3,000 4 B round trips was 42-44 µs with it
 * and 14-16 without (Node 24 and 26), and of 3,000 4 B allReduces between 2
 * nodes 195-233 µs against 82-105 (Node 26); over 30,000 round trips the
 * total came out the same, the later tier-ups (blocks of 10-28 µs around
 * 16,000 calls into a function) being the price.
 */
import { setFlagsFromString } from 'node:v8';
import { Script } from 'node:vm';

const FLAG = 'invocation-count-for-turbofan';
const CALLS_BEFORE_TURBOFAN = 1_000;
/** V8 13 (Node 24) is the first with Maglev on by default. */
const FIRST_V8_WITH_MAGLEV = 13;
/**
 * What V8 starts TurboFan's count at (`node --print-flag-values`): 16,000 in
 * V8 14, 10,000 in V8 13 (both implied by Maglev), 3,000 without Maglev.
 * Setting back the one a process started with gives V8 its start-up flags
 * again, as a code cache sees them; a FlagProbe says which one it is.
 */
const STARTING_COUNTS = [16_000, 10_000, 3_000];

const hasMaglev = (v8Version: string) => Number.parseInt(v8Version, 10) >= FIRST_V8_WITH_MAGLEV;

/** The flag a rank sets for its process, or undefined where it leaves V8's tiering as it is. */
export function rankTieringFlag(
  v8Version = process.versions.v8,
  userFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`,
): string | undefined {
  if (!hasMaglev(v8Version)) return undefined;
  if (userFlags.includes(FLAG) || userFlags.includes(FLAG.replaceAll('-', '_'))) return undefined;
  return `--${FLAG}=${CALLS_BEFORE_TURBOFAN}`;
}

/** Sets the rank tiering flag for the process (V8 reads it at each tier-up decision, in every thread). */
export function tuneRankTiering(): void {
  const flag = rankTieringFlag();
  if (flag !== undefined) setFlagsFromString(flag);
}

/**
 * Says whether V8's flags are those it had when the probe was made, as a
 * code cache made then sees them. V8 matches a cache to its source by the
 * source's length, so each look compiles a new text of that length, which no
 * compilation cache of the thread answers for.
 */
export class FlagProbe {
  #looks = 0;
  readonly #cache = new Script(this.#text()).createCachedData();
  /** The flag that gives V8 the probe's flags back, once found; null where no STARTING_COUNTS does. */
  #restore: string | null | undefined;

  #text(): string {
    return `void ${String(this.#looks++).padStart(9, '0')};`;
  }

  matches(): boolean {
    return new Script(this.#text(), { cachedData: this.#cache }).cachedDataRejected !== true;
  }

  /**
   * Gives V8 the probe's flags back, where a starting count does; false where none does, and at once
   * where V8 has no Maglev (the ranks never set the flag there, and V8 before 13 prints an error to
   * stderr for a flag it does not know).
   */
  restore(): boolean {
    if (this.matches()) return true;
    if (this.#restore === undefined) {
      this.#restore = null;
      const counts = hasMaglev(process.versions.v8) ? STARTING_COUNTS : [];
      for (const count of counts) {
        setFlagsFromString(`--${FLAG}=${count}`);
        if (this.matches()) {
          this.#restore = `--${FLAG}=${count}`;
          break;
        }
      }
    } else if (this.#restore !== null) setFlagsFromString(this.#restore);
    return this.#restore !== null;
  }
}

/**
 * Runs `run` under the flags V8 had when `probe` was made, and puts the rank
 * tiering flag back after; where those flags cannot be given back, does not
 * run it and returns false.
 */
export function underFlagsOf(probe: FlagProbe, run: () => void): boolean {
  if (probe.matches()) {
    run();
    return true;
  }
  const restored = probe.restore();
  if (restored) run();
  tuneRankTiering();
  return restored;
}

let running = 0;
/** Made under the flags of this process before its first thread job. */
let launcherProbe: FlagProbe | undefined;

/**
 * A job's rank threads are about to start: under V8's own flags, unless
 * another job of this process runs. The function returned is called once
 * they have all exited, and gives V8 its flags back once no job runs; where
 * no starting count does (another V8), the flag stays set, and only a
 * process's first job starts its threads under V8's own flags.
 */
export function rankThreadsStarting(): () => void {
  if (rankTieringFlag() === undefined) return () => {};
  const probe = (launcherProbe ??= new FlagProbe());
  running++;
  return () => {
    running--;
    if (running === 0 && !probe.restore()) tuneRankTiering();
  };
}
