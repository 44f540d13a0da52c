/**
 * One cold-calls job in a process of its own, so that its calls are a fresh
 * job's (rank threads that made none before, in a process whose V8 compiled
 * none of them): prints rank 0's clock readings (bench/cold-calls-rank.ts) as
 * JSON.
 *
 *   node --import tsx bench/cold-calls-job.ts <ranks> '{"op":"roundTrip","elements":1,"counts":[1000,3000]}'
 */
import { spawnThreads } from '../src/index.ts';
import type { ColdCallsArgs } from './cold-calls-rank.ts';

const [ranks, args] = process.argv.slice(2);
const [at] = await spawnThreads<number[]>(new URL('./cold-calls-rank.ts', import.meta.url), {
  worldSize: Number(ranks),
  args: JSON.parse(args) as ColdCallsArgs,
  timeoutMs: 600_000,
});
console.log(JSON.stringify(at));
