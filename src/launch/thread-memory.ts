/**
 * Whether a job's rank threads fit in this machine's memory, checked before
 * any is started: every rank thread is a V8 isolate with its own heap and its
 * own copy of the loaded modules, so a worldSize far past what memory holds
 * would otherwise grow until the machine swaps or the OOM killer steps in,
 * long before the job could fail on its own.
 */
import os from 'node:os';
import type { ResourceLimits } from 'node:worker_threads';

/**
 * What one rank thread adds to the process's resident memory once its modules
 * are loaded: an idle rank's under the TypeScript loader, rounded up, so the
 * check errs towards starting. A job's own tensors come on top.
 */
export const DEFAULT_RANK_THREAD_BYTES = 48 * 2 ** 20;

const MiB = 2 ** 20;
const mib = (bytes: number) => `${Math.round(bytes / MiB)} MiB`;

/** Memory a job may still take: free memory, or less where a cgroup limit leaves less room. */
export function availableMemory(): { bytes: number; what: string } {
  const free = os.freemem();
  // libuv reports "no limit" as a huge number (2^64) or 0.
  const limit = process.constrainedMemory?.() ?? 0;
  if (limit > 0 && limit < os.totalmem()) {
    const room = Math.max(0, limit - process.memoryUsage().rss);
    if (room < free)
      return { bytes: room, what: `the memory limit of ${mib(limit)} less this process's use` };
  }
  return { bytes: free, what: 'free memory' };
}

/**
 * Throws a RangeError naming the worldSize, the estimate and the memory
 * available when the `starting` new threads (warm ones of a pool are already
 * in the free memory) of `perRankBytes` each do not fit; `perRankBytes` 0
 * skips the check.
 */
export function checkThreadMemory(
  worldSize: number,
  perRankBytes: number,
  where: string,
  starting = worldSize,
): void {
  if (!(Number.isSafeInteger(perRankBytes) && perRankBytes >= 0)) {
    throw new RangeError(`${where}: rankThreadBytes must be a non-negative integer, got ${perRankBytes}`);
  }
  const needed = starting * perRankBytes;
  const available = availableMemory();
  if (needed <= available.bytes) return;
  throw new RangeError(
    `${where}: worldSize ${worldSize} needs about ${mib(needed)} for ` +
      `${starting === worldSize ? 'its rank threads' : `the ${starting} rank threads it has to start`} ` +
      `(${mib(perRankBytes)} each, rankThreadBytes), but only ${mib(available.bytes)} is available ` +
      `(${available.what}); run fewer ranks, run them as processes (launchProcesses, tensorcomm run), ` +
      'or set rankThreadBytes to what one of your ranks really needs (0 skips this check)',
  );
}

/** Ranks per core from which rank threads get a small young generation (see rankResourceLimits). */
export const SMALL_HEAP_RANKS_PER_CORE = 8;
const SMALL_YOUNG_GENERATION_MB = 2;

/**
 * V8 limits for the rank threads of a job of `worldSize`: none, unless ranks
 * outnumber the cores many times over, where memory runs out before the
 * cores do. There each thread's young generation is held to 2 MiB (V8 grows
 * it to tens of MiB under allocation): across that many isolates the memory
 * saved outweighs the extra scavenges, which slow a rank only where it has a
 * core to itself.
 */
export function rankResourceLimits(worldSize: number): ResourceLimits | undefined {
  if (worldSize < SMALL_HEAP_RANKS_PER_CORE * os.availableParallelism()) return undefined;
  return { maxYoungGenerationSizeMb: SMALL_YOUNG_GENERATION_MB };
}
