/**
 * One start-up measurement in a process of its own (bench/startup.ts starts
 * it), so its first job meets a process that has started no rank thread yet
 * and its peak RSS is the job's: the first spawnThreads job (start → barrier
 * → resolved), a second one on new threads, then jobs on warm pooled threads.
 *
 *   node --import tsx bench/startup-job.ts <entry> <worldSize> <warmRepeats>
 */

import { spawnThreads } from '../src/index.ts';
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
const pool = new RankThreadPool({ typeScript: entry.pathname.endsWith('.ts') });
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
