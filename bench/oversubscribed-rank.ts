/**
 * Rank entry of the oversubscribed bench: every rank allReduces one small
 * float32 tensor in a loop; rank 0 reports the mean time per call of each
 * repeat (all ranks leave each call together, so rank 0's clock is the call's).
 */
import { type RankContext, Tensor } from '../src/index.ts';

export interface OversubscribedRankArgs {
  elements: number;
  warmup: number;
  iterations: number;
  repeats: number;
}

/** Mean microseconds per allReduce, one figure per repeat. */
export default async function main(ctx: RankContext, args: OversubscribedRankArgs): Promise<number[]> {
  const t = Tensor.full([args.elements], 1, 'float32');
  for (let i = 0; i < args.warmup; i++) await ctx.world.allReduce(t);
  const means: number[] = [];
  for (let r = 0; r < args.repeats; r++) {
    await ctx.world.barrier();
    const started = performance.now();
    for (let i = 0; i < args.iterations; i++) await ctx.world.allReduce(t);
    means.push(((performance.now() - started) * 1000) / args.iterations);
  }
  return means;
}
