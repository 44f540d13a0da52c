/**
 * spawnThreads' `threads`: one thread per rank (the default), or every rank
 * an async task of one thread. What needs a thread per rank is refused here,
 * before any thread starts, rather than left to hang or misbehave.
 */
import type { FaultSpec } from '../runtime/faults/options.ts';
import type { Device } from '../tensor/dtype.ts';

/** Fault kinds that take a rank's thread out (an exit ends it, a hang holds it): whole threads only. */
const THREAD_FAULTS: ReadonlySet<FaultSpec['kind']> = new Set(['exit', 'hang']);

/** Whether the job's ranks run as tasks of one thread; a RangeError or TypeError for what cannot. */
export function ranksAsTasks(
  options: { worldSize: number; threads?: number; faults?: FaultSpec[] },
  devices: readonly Device[],
): boolean {
  const { worldSize, threads } = options;
  if (threads === undefined || threads === worldSize) return false;
  if (threads !== 1) {
    throw new RangeError(
      `spawnThreads: threads must be ${worldSize} (worldSize: a thread per rank, the default) or 1 ` +
        `(every rank an async task of one thread), got ${threads}; other counts are not supported`,
    );
  }
  const gpu = devices.findIndex((d) => d !== 'cpu');
  if (gpu >= 0) {
    throw new RangeError(
      `spawnThreads: threads: 1 runs ranks on the CPU only, but rank ${gpu} is on ${devices[gpu]}; ` +
        'ranks on GPUs need a thread each (leave threads out)',
    );
  }
  const fault = options.faults?.find((f) => THREAD_FAULTS.has(f.kind));
  if (fault) {
    throw new RangeError(
      `spawnThreads: an injected '${fault.kind}' fault takes out a rank's thread, which threads: 1 ` +
        "shares among every rank; inject 'throw' or 'delay', or leave threads out",
    );
  }
  return true;
}
