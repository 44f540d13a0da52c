/**
 * Rank entry of the oversubscribed bench: every rank allReduces one small
 * float32 tensor in a loop; rank 0 reports the mean time per call of the
 * warm-up and of each repeat after it (all ranks leave each call together,
 * so rank 0's clock is the call's).
 */
import { type RankContext, Tensor } from '../src/index.ts';

export interface OversubscribedRankArgs {
  elements: number;
  warmup: number;
  iterations: number;
  repeats: number;
}

export interface OversubscribedRankResult {
  /** Mean microseconds per allReduce over the warm-up: V8 compiles the call path in every rank thread. */
  warmupUs: number;
  /** Mean microseconds per allReduce, one figure per repeat. */
  means: number[];
}

export default async function main(
  ctx: RankContext,
  args: OversubscribedRankArgs,
): Promise<OversubscribedRankResult> {
  const t = Tensor.full([args.elements], 1, 'float32');
  const warming = performance.now();
  for (let i = 0; i < args.warmup; i++) await ctx.world.allReduce(t);
  const warmupUs = ((performance.now() - warming) * 1000) / args.warmup;
  const means: number[] = [];
  for (let r = 0; r < args.repeats; r++) {
    await ctx.world.barrier();
    const started = performance.now();
    for (let i = 0; i < args.iterations; i++) await ctx.world.allReduce(t);
    means.push(((performance.now() - started) * 1000) / args.iterations);
  }
  return { warmupUs, means };
}
