/** Rank entry of bench/debug-overhead.ts: times one 1 KiB op back to back, in batches after a barrier. */

import { median } from '../src/cli/bench/collectives-rank.ts';
import { type RankContext, Tensor } from '../src/index.ts';

export interface OverheadArgs {
  op: 'allReduce' | 'broadcast';
  bytes: number;
  warmupIters: number;
  iters: number;
  batches: number;
}

/** Median microseconds per call on rank 0 (every rank returns its own). */
export default async function main(ctx: RankContext, args: OverheadArgs): Promise<number> {
  const g = ctx.world;
  const t = Tensor.zeros([args.bytes / 4], 'float32');
  const step = args.op === 'allReduce' ? () => g.allReduce(t) : () => g.broadcast(t, { src: 0 });
  for (let i = 0; i < args.warmupIters; i++) await step();
  const perCallUs: number[] = [];
  for (let b = 0; b < args.batches; b++) {
    await g.barrier();
    const started = performance.now();
    for (let i = 0; i < args.iters; i++) await step();
    perCallUs.push(((performance.now() - started) / args.iters) * 1000);
  }
  return median(perCallUs);
}
