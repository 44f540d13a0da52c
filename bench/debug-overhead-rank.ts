/**
 * Rank entry of bench/debug-overhead.ts. `interleaved`: batches of a 1 KiB
 * allReduce on the world group (this job's debugging options) alternate with
 * batches on a group built with no monitor at all, in the same threads, so
 * machine noise hits both alike. `single`: one op timed on the world group.
 */
import { median } from '../src/cli/bench/median.ts';
import { rankMonitor, setRankMonitor } from '../src/debug/monitor.ts';
import { type RankContext, Tensor, type ThreadGroup } from '../src/index.ts';

export interface OverheadArgs {
  mode: 'interleaved' | 'single';
  op: 'allReduce' | 'broadcast';
  bytes: number;
  warmupIters: number;
  iters: number;
  batches: number;
}

export interface OverheadResult {
  /** Median µs per call on the world group. */
  us: number;
  /** interleaved only: median µs per call on the unmonitored group. */
  bareUs?: number;
}

/** A group whose calls skip the debugging layer: built while this thread has no rank monitor. */
async function bareGroup(ctx: RankContext): Promise<ThreadGroup> {
  const monitor = rankMonitor();
  setRankMonitor(undefined);
  try {
    return await ctx.newGroup(
      Array.from({ length: ctx.worldSize }, (_, r) => r),
      { name: 'bare' },
    );
  } finally {
    setRankMonitor(monitor);
  }
}

function stepOf(g: ThreadGroup, op: OverheadArgs['op'], t: Tensor): () => PromiseLike<unknown> {
  return op === 'allReduce' ? () => g.allReduce(t) : () => g.broadcast(t, { src: 0 });
}

async function batch(ctx: RankContext, step: () => PromiseLike<unknown>, iters: number): Promise<number> {
  await ctx.world.barrier();
  const started = performance.now();
  for (let i = 0; i < iters; i++) await step();
  return ((performance.now() - started) / iters) * 1000;
}

export default async function main(ctx: RankContext, args: OverheadArgs): Promise<OverheadResult> {
  const t = Tensor.zeros([args.bytes / 4], 'float32');
  const monitored = stepOf(ctx.world, args.op, t);
  const bare = args.mode === 'interleaved' ? stepOf(await bareGroup(ctx), args.op, t) : undefined;
  for (let i = 0; i < args.warmupIters; i++) {
    await monitored();
    await bare?.();
  }
  const on: number[] = [];
  const off: number[] = [];
  for (let b = 0; b < args.batches; b++) {
    on.push(await batch(ctx, monitored, args.iters));
    if (bare) off.push(await batch(ctx, bare, args.iters));
  }
  return { us: median(on), bareUs: bare ? median(off) : undefined };
}
