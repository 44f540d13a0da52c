/**
 * Rank entry of bench/debug-overhead.ts. `interleaved`: batches of a 1 KiB
 * allReduce on groups with this job's debugging options alternate with
 * batches on groups built with no monitor at all, in the same threads, so
 * machine noise hits both alike; several groups of each kind, so what sets
 * one group's speed apart from another's averages out. `single`: one op timed on the
 * world group.
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
  /** interleaved only: median µs per call on the unmonitored groups. */
  bareUs?: number;
}

/** A group whose calls skip the debugging layer: built while this thread has no rank monitor. */
async function bareGroup(ctx: RankContext, name: string): Promise<ThreadGroup> {
  const monitor = rankMonitor();
  setRankMonitor(undefined);
  try {
    return await ctx.newGroup(
      Array.from({ length: ctx.worldSize }, (_, r) => r),
      { name },
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

/** Groups of each kind the batches cycle through (see main). */
const GROUPS_PER_KIND = 4;

export default async function main(ctx: RankContext, args: OverheadArgs): Promise<OverheadResult> {
  const t = Tensor.zeros([args.bytes / 4], 'float32');
  if (args.mode === 'single') {
    const step = stepOf(ctx.world, args.op, t);
    for (let i = 0; i < args.warmupIters; i++) await step();
    const times: number[] = [];
    for (let b = 0; b < args.batches; b++) times.push(await batch(ctx, step, args.iters));
    return { us: median(times) };
  }
  // Several groups of each kind, made alternately and taken in turn: one group's calls can run a third
  // faster or slower than another's for reasons of their own (one group against another, both without
  // the layer, read -10% to +31% in four jobs; four of each against four, -1.7% to +1.2% in six), and
  // that must not read as the layer's cost.
  const monitored: Array<() => PromiseLike<unknown>> = [];
  const bare: Array<() => PromiseLike<unknown>> = [];
  for (let i = 0; i < GROUPS_PER_KIND; i++) {
    const all = Array.from({ length: ctx.worldSize }, (_, r) => r);
    monitored.push(stepOf(await ctx.newGroup(all, { name: `monitored${i}` }), args.op, t));
    bare.push(stepOf(await bareGroup(ctx, `bare${i}`), args.op, t));
  }
  for (let i = 0; i < args.warmupIters; i++) {
    await monitored[i % GROUPS_PER_KIND]();
    await bare[i % GROUPS_PER_KIND]();
  }
  const on: number[] = [];
  const off: number[] = [];
  for (let b = 0; b < args.batches; b++) {
    for (let i = 0; i < GROUPS_PER_KIND; i++) {
      on.push(await batch(ctx, monitored[i], args.iters));
      off.push(await batch(ctx, bare[i], args.iters));
    }
  }
  return { us: median(on), bareUs: median(off) };
}
