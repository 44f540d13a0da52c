/**
 * One steadiness job in a process of its own (bench/node-versions.ts starts
 * it with each Node), so its calls are a fresh job's: prints rank 0's block
 * means (µs a round trip) as JSON.
 *
 *   node --import tsx bench/steadiness-job.ts <blocks> <blockSize>
 */
import { spawnThreads } from '../src/index.ts';

const [blocks, blockSize] = process.argv.slice(2).map(Number);
const [means] = await spawnThreads<number[]>(new URL('./steadiness-rank.ts', import.meta.url), {
  worldSize: 2,
  args: { blocks, blockSize },
});
console.log(JSON.stringify(means));
