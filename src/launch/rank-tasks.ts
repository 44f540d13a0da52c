/**
 * Every rank of a job as an async task of one thread (spawnThreads'
 * `threads: 1`), so a job of thousands of ranks costs one isolate instead of
 * one each. Each rank runs in a task of its own (runtime/rank-local.ts), so
 * the state a rank keeps for itself (monitor, clock, ledger, ...) stays its
 * own; its reports carry its rank, which the launcher's side (task-thread.ts)
 * hands to that rank alone.
 */
import { parentPort } from 'node:worker_threads';
import { runAsRankTask } from '../runtime/rank-local.ts';
import type { RankWorkerReport } from './rank-threads.ts';
import type { RankWorkerData } from './spawn-threads.ts';
import type { TaskReport } from './task-thread.ts';

type RunRank = (data: RankWorkerData, report: (message: RankWorkerReport) => void) => Promise<void>;

/** Starts every rank of the job `data` describes (its identity: rank 0's), each as its own task. */
export function runRankTasks(data: RankWorkerData, runRank: RunRank): void {
  const { names, devices, worldSize } = data.identity;
  for (let rank = 0; rank < worldSize; rank++) {
    const identity = { ...data.identity, rank, name: names[rank], device: devices[rank] };
    const report = (message: RankWorkerReport) =>
      parentPort!.postMessage({ rank, report: message } satisfies TaskReport);
    void runAsRankTask(() => runRank({ ...data, identity }, report));
  }
}
