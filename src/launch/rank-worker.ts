/**
 * Bootstrap of one rank thread: builds the RankContext through the registered
 * rank setup, runs the entry's default export, and reports the outcome to the
 * launcher exactly once.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AbortWord } from '../runtime/abort-word.ts';
import { errorReport } from './rank-report.ts';
import type { ClosableContext, RankSetupModule } from './rank-setup.ts';
import type { RankWorkerData, RankWorkerReport } from './spawn-threads.ts';

const data = workerData as RankWorkerData;

function report(message: RankWorkerReport): void {
  parentPort!.postMessage(message);
}

async function run(): Promise<void> {
  const abort = new AbortWord(data.abort);
  const setup = (await import(data.setupUrl)) as RankSetupModule;
  let ctx: ClosableContext | undefined;
  let value: unknown;
  try {
    ctx = await setup.createRankContext(data.identity, data.shared, abort, data.job);
    const entry = (await import(data.entryUrl)) as { default?: unknown };
    report({ kind: 'loaded' });
    if (typeof entry.default !== 'function') {
      throw new TypeError(`entry module ${data.entryUrl} must export a default function main(ctx, args)`);
    }
    value = await entry.default(ctx, data.args);
  } catch (error) {
    await ctx?.close(error);
    throw error;
  }
  await ctx.close();
  try {
    report({ kind: 'result', value });
  } catch (error) {
    throw new TypeError(
      `rank ${data.identity.rank} returned a value that cannot be sent to the launcher: ${error}`,
    );
  }
}

run().catch((error: unknown) => report(errorReport(error)));
