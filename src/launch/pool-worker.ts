/**
 * Bootstrap of a warm rank thread (RankThreadPool): it stays up between
 * jobs and runs each job it is handed as a one-job thread runs its only one
 * (rank-worker.ts), so what it loaded (the library, a test file) stays
 * loaded and the next job starts in milliseconds. Messages are handled one
 * at a time, in order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { importModule } from '../runtime/import-module.ts';
import { describeError, type ErrorReport } from './rank-report.ts';
import { runRank } from './rank-worker.ts';
import type { RankWorkerData } from './spawn-threads.ts';

export interface PoolWorkerData {
  pool: true;
  /** The rank setup module, loaded before the thread says it is ready. */
  setupUrl: string;
}

/** From the pool: run a job, or load a module and call its `prepare(arg)` ahead of the jobs that need it. */
export type PoolRequest =
  | { kind: 'job'; data: RankWorkerData }
  | { kind: 'prepare'; module: string; arg: unknown };

export type PoolReport =
  | { kind: 'ready' }
  | { kind: 'prepared' }
  | { kind: 'prepare-failed'; error: ErrorReport };

const port = parentPort!;
const report = (message: PoolReport) => port.postMessage(message);

async function prepare(module: string, arg: unknown): Promise<void> {
  try {
    const loaded = await importModule<{ prepare?: (arg: unknown) => unknown }>(module);
    if (typeof loaded.prepare !== 'function')
      throw new TypeError(`${module} exports no prepare(arg) function`);
    await loaded.prepare(arg);
    report({ kind: 'prepared' });
  } catch (error) {
    report({ kind: 'prepare-failed', error: describeError(error) });
  }
}

// A pool also starts a thread from here for a job of ranks as tasks (`threads: 1`), which rank-worker.ts
// runs from its workerData as it loads: that thread takes no part in the pool's protocol.
if ((workerData as { pool?: boolean }).pool === true) {
  let queue = Promise.resolve();
  port.on('message', (request: PoolRequest) => {
    queue = queue.then(() =>
      request.kind === 'job' ? runRank(request.data) : prepare(request.module, request.arg),
    );
  });
  await importModule((workerData as PoolWorkerData).setupUrl);
  report({ kind: 'ready' });
}
