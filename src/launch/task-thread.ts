/**
 * The launcher's side of a thread that carries every rank of a job as a task
 * (rank-tasks.ts): one RankThread per rank, as RankThreads drives them, over
 * the one Worker. Each rank hears its own reports, and every rank the
 * thread's error and exit; the thread is stopped once every rank was asked to
 * stop (a rank done stops alone in a thread of its own, but here its peers
 * still run).
 */
import { EventEmitter } from 'node:events';
import type { Worker } from 'node:worker_threads';
import type { RankThread, RankWorkerReport } from './rank-threads.ts';

/** A rank's report as its thread posts it. */
export interface TaskReport {
  rank: number;
  report: RankWorkerReport;
}

export function rankTasksOn(worker: Worker, worldSize: number): RankThread[] {
  const stopAsked = new Set<number>();
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
  const tasks = Array.from({ length: worldSize }, (_, rank) => {
    const task = new EventEmitter() as EventEmitter & RankThread;
    task.terminate = () => {
      stopAsked.add(rank);
      if (stopAsked.size === worldSize) void worker.terminate();
      return exited;
    };
    return task;
  });
  worker.on('message', ({ rank, report }: TaskReport) => tasks[rank].emit('message', report));
  worker.on('error', (error) => {
    for (const task of tasks) task.emit('error', error);
  });
  worker.on('exit', (code) => {
    for (const task of tasks) task.emit('exit', code);
  });
  return tasks;
}
