/**
 * Whether a job's rank threads fit in this machine's memory, checked before
 * any is started: every rank thread is a V8 isolate with its own heap and its
 * own copy of the loaded modules, so a worldSize far past what memory holds
 * would otherwise grow until the machine swaps or the OOM killer steps in,
 * long before the job could fail on its own.
 */
import os from 'node:os';

/**
 * What one rank thread adds to the process's resident memory once its modules
 * are loaded: 39–46 MiB measured on Node 20 (x64) for an idle rank under the
 * TypeScript loader, rounded up. A job's own tensors come on top.
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
