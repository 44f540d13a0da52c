/**
 * Rank entry of bench/predict-cost.ts: a job of mixed calls, small and large,
 * collective and point to point, some overlapped with declared compute, run
 * twice: once cold (in the job's wall time, on code V8 has not optimized) and
 * once warm, timed on every rank between barriers. The same program runs with
 * and without predict mode; only the job's options differ.
 */
import { type RankContext, Tensor } from '../src/index.ts';

export interface CostArgs {
  /** Rounds of MIXED_CALLS calls each. */
  steps: number;
}

export interface CostResult {
  /** The second pass over the calls, barrier to barrier. */
  warmMs: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;

/** Calls one step makes on each rank: the size of the job is steps x this. */
export const MIXED_CALLS = 7;

/** A float32 buffer of `bytes`, zeros: repeated sums stay finite. */
const buffer = (bytes: number) => Tensor.zeros([bytes / 4], 'float32');

export default async function main(ctx: RankContext, args: CostArgs): Promise<CostResult> {
  const g = ctx.world;
  const peer = 1 - g.rank;
  // Allocated once, outside the passes.
  const small = buffer(4 * KiB);
  const large = buffer(4 * MiB);
  const piece = buffer(512 * KiB);
  const gathered = [buffer(512 * KiB), buffer(512 * KiB)];
  const half = buffer(2 * MiB);
  const message = buffer(64 * KiB);
  const step = async () => {
    const overlapped = g.allReduce(large);
    ctx.predict?.compute(200);
    await g.allReduce(small);
    await overlapped;
    await g.allGather(gathered, piece);
    await g.reduceScatterTensor(half, large);
    await g.broadcast(piece, { src: 0 });
    // A message each way: rank 0 sends first, so the pair never waits on itself.
    for (const sender of [0, 1]) {
      await (g.rank === sender ? g.send(message, peer) : g.recv(message, peer));
    }
    await g.barrier();
  };
  const pass = async () => {
    for (let i = 0; i < args.steps; i++) await step();
  };
  await pass();
  await g.barrier();
  const started = performance.now();
  await pass();
  return { warmMs: performance.now() - started };
}
