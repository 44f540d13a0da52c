/**
 * Bootstrap of one rank thread: builds the RankContext through the registered
 * rank setup, runs the entry's default export, and reports the outcome to the
 * launcher exactly once. A pooled thread (pool-worker.ts) runs one job after
 * another here, one per message.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AbortWord } from '../runtime/abort-word.ts';
import { importModule } from '../runtime/import-module.ts';
import { registerInterruptCheck } from '../tensor/interrupt.ts';
import { saveCodeCaches } from './code-caches.ts';
import { errorReport } from './rank-report.ts';
import type { ClosableContext, RankSetupModule } from './rank-setup.ts';
import { runRankTasks } from './rank-tasks.ts';
import type { RankWorkerReport } from './rank-threads.ts';
import type { RankWorkerData } from './spawn-threads.ts';
import { packTensors, unpackTensors } from './tensor-transfer.ts';

export type ReportRank = (message: RankWorkerReport) => void;

function toLauncher(message: RankWorkerReport): void {
  parentPort!.postMessage(message);
}

/** Runs one job's rank and reports its outcome exactly once, through `report`; never rejects. */
export function runRank(data: RankWorkerData, report: ReportRank = toLauncher): Promise<void> {
  // The thread lives until its main settles, even while main only awaits what holds no handle of
  // the event loop (an Atomics.waitAsync on the user's own memory): else it would exit mid-main.
  const alive = setInterval(() => {}, 2 ** 30);
  return run(data, report)
    .catch((error: unknown) => report(errorReport(error)))
    .finally(() => {
      clearInterval(alive);
      registerInterruptCheck(undefined);
    });
}

async function run(data: RankWorkerData, report: ReportRank): Promise<void> {
  const abort = new AbortWord(data.abort);
  // A long kernel (fill_ over gigabytes) on this thread stops between chunks once a peer failed.
  registerInterruptCheck(() => abort.throwIfAborted());
  const setup = await importModule<RankSetupModule>(data.setupUrl);
  let ctx: ClosableContext | undefined;
  let value: unknown;
  try {
    ctx = await setup.createRankContext(data.identity, data.shared, abort, data.job, {
      lost: (how) => report({ kind: 'lost', how }),
    });
    const entry = await importModule<{ default?: unknown }>(data.entryModule);
    report({ kind: 'loaded' });
    if (typeof entry.default !== 'function') {
      throw new TypeError(`entry module ${data.entryUrl} must export a default function main(ctx, args)`);
    }
    value = await entry.default(ctx, unpackTensors(data.args));
  } catch (error) {
    await ctx?.close(error);
    throw error;
  }
  await ctx.close();
  // One thread per job is enough: the last rank to finish, since writing a cache made under other flags
  // sets them for a moment in every thread (script-chunk-loader.ts), where they would reach ranks still
  // running. Before the report, after which the thread may be stopped.
  if (Atomics.sub(new Int32Array(data.unfinished), 0, 1) === 1) saveCodeCaches();
  try {
    report({ kind: 'result', value: packTensors(value) });
  } catch (error) {
    throw new TypeError(
      `rank ${data.identity.rank} returned a value that cannot be sent to the launcher: ${error}`,
    );
  }
}

const data = workerData as RankWorkerData & { pool?: boolean };
// A thread carrying every rank of its job as a task (spawnThreads' `threads: 1`) runs them all.
if (data.job?.tasks) runRankTasks(data, runRank);
else if (data.pool !== true) void runRank(data);
