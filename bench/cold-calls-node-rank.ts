/**
 * A rank of a cold-calls job across nodes (bench/process-small-calls.ts): a
 * process of torchrun's environment, on a node of its own id, runs
 * bench/cold-calls-rank.ts's calls from the job's first on; rank 0 prints
 * its clock readings as one line.
 *
 *   node --import tsx bench/cold-calls-node-rank.ts '{"op":"allReduce","elements":1,"counts":[1000,3000]}'
 */
import { initProcess } from '../src/index.ts';
import coldCalls, { type ColdCallsArgs } from './cold-calls-rank.ts';

const ctx = await initProcess();
const at = await coldCalls(ctx, JSON.parse(process.argv[2] ?? '') as ColdCallsArgs);
if (ctx.rank === 0) console.log(`cold-calls ${JSON.stringify(at)}`);
await ctx.close();
