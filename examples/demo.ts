/**
 * tensorcomm demo: four ranks as worker threads of this process, doing real
 * collective work through shared memory. Run with `npm start`.
 */
import { spawnThreads } from 'tensorcomm';

const worldSize = Number(process.env.WORLD_SIZE ?? 4);
const started = performance.now();
const lines = await spawnThreads<string>(new URL('./demo-rank.ts', import.meta.url), {
  worldSize,
  args: { elements: 1 << 20 },
  timeoutMs: 60_000,
});
for (const line of lines) console.log(line);
console.log(`${worldSize} ranks finished in ${(performance.now() - started).toFixed(0)} ms`);
