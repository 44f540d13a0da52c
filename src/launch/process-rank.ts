/**
 * Bootstrap of one rank process started by launchProcesses. An entry with a
 * default export main(ctx, args) runs like a thread rank: its context is built
 * here and its return value reported. Any other script runs as it is and
 * builds its own context with initProcess(); its rank succeeds when it exits
 * with code 0.
 */

import { importModule } from '../runtime/import-module.ts';
import { saveCodeCaches } from './code-caches.ts';
import { LaunchError } from './errors.ts';
import type { ProcessMessage } from './launch-processes.ts';
import { errorReport, type RankReport } from './rank-report.ts';
import type { ClosableContext, ProcessSetupModule } from './rank-setup.ts';
import { packTensors, unpackTensors } from './tensor-transfer.ts';

let finished = false;

function report(message: RankReport): Promise<void> {
  // The callback runs once the message is written out, also when it had to be queued.
  return new Promise((resolve) => {
    if (process.send) process.send(message, () => resolve());
    else resolve();
  });
}

// The launcher is gone (killed, or crashed): nobody will collect this rank, so it must not linger.
process.on('disconnect', () => {
  if (finished) return;
  console.error(`rank ${process.env.RANK}: the launcher went away; exiting`);
  process.exit(1);
});

function startMessage(): Promise<unknown> {
  return new Promise((resolve) => {
    process.once('message', (message: ProcessMessage) =>
      resolve(message.kind === 'start' ? unpackTensors(message.args) : undefined),
    );
  });
}

/** True when the entry was a main(ctx, args) whose end is the rank's end, as for thread ranks. */
async function run(): Promise<boolean> {
  const args = await startMessage();
  const { TENSORCOMM_ENTRY: entryUrl, TENSORCOMM_PROCESS_SETUP: setupUrl } = process.env;
  if (!entryUrl || !setupUrl) {
    throw new LaunchError(
      'process-rank: TENSORCOMM_ENTRY / TENSORCOMM_PROCESS_SETUP are not set; start ranks with launchProcesses',
    );
  }
  // The launcher's setup module, so the entry need not import tensorcomm itself.
  const setup = await importModule<ProcessSetupModule>(setupUrl);
  const entry = await importModule<{ default?: unknown }>(entryUrl);
  let value: unknown;
  let ctx: ClosableContext | undefined;
  try {
    if (typeof entry.default === 'function') {
      ctx = await setup.initProcess();
      value = await entry.default(ctx, args);
    }
  } catch (error) {
    await ctx?.close(error);
    throw error;
  }
  await ctx?.close();
  // One process per node is enough (its bundle is the node's), once a job has run, as for thread ranks.
  if (ctx !== undefined && process.env.LOCAL_RANK === '0') saveCodeCaches();
  await report({ kind: 'result', value: packTensors(value) });
  return ctx !== undefined;
}

run().then(
  (ownsEnd) => {
    finished = true;
    if (ownsEnd) process.exit(0);
    // The channel would keep the process alive; a plain script's own handles decide when it ends.
    process.channel?.unref();
  },
  async (error: unknown) => {
    finished = true;
    await report(errorReport(error));
    process.exit(1);
  },
);
