/**
 * One start-up measurement in a process of its own (bench/startup.ts starts
 * it), so its first job meets a process that has started no rank thread yet
 * and its peak RSS is the job's: the first spawnThreads job (start → barrier
 * → resolved), a second one on new threads, then jobs on warm pooled threads
 * that load one bundle of the pool bootstrap, the library and the entry, as
 * rankTest's threads do (without one, every thread runs tsx over the sources).
 *
 *   node --import tsx bench/startup-job.ts <entry> <worldSize> <warmRepeats>
 */

import { spawnThreads } from '../src/index.ts';
import { rankBundle } from '../src/launch/rank-bundle.ts';
import { rankSetupUrl } from '../src/launch/rank-setup.ts';
import { RankThreadPool } from '../src/launch/rank-thread-pool.ts';

export interface StartupJobResult {
  /** The first job of the process. */
  firstMs: number;
  /** A second job on new threads. */
  coldMs: number;
  /** Jobs on warm threads (the pool's first job, which starts them, not among them). */
  warmMs: number[];
  /** Peak resident memory of the process over the two cold jobs. */
  peakRssBytes: number;
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

const [entryPath, worldSizeText, repeatsText] = process.argv.slice(2);
const entry = new URL(entryPath, `file://${process.cwd()}/`);
const worldSize = Number(worldSizeText);
const firstMs = await timed(() => spawnThreads(entry, { worldSize }));
const coldMs = await timed(() => spawnThreads(entry, { worldSize }));
const peakRssBytes = process.resourceUsage().maxRSS * 1024;
const poolWorker = new URL('../src/launch/pool-worker.ts', import.meta.url).href;
const bundle = await rankBundle(poolWorker, rankSetupUrl(), entry.href);
if (!bundle) throw new Error(`bench/startup-job: ${entry.href} cannot be bundled`);
const pool = new RankThreadPool({ bundle });
const warmMs: number[] = [];
try {
  await pool.run(entry, { worldSize });
  for (let i = 0; i < Number(repeatsText); i++)
    warmMs.push(await timed(() => pool.run(entry, { worldSize })));
} finally {
  await pool.close();
}
const result: StartupJobResult = { firstMs, coldMs, warmMs, peakRssBytes };
console.log(JSON.stringify(result));
