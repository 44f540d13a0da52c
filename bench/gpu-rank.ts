/** One rank of bench/gpu.ts: times a device copy or an allReduce on the rank's device. */
import { type RankContext, Tensor } from '../src/index.ts';

export interface GpuBenchArgs {
  op: 'copy' | 'allReduce';
  bytes: number;
  iterations: number;
}

export interface GpuBenchSample {
  medianUs: number;
  algbw: number;
  busbw: number;
}

export default async function main(ctx: RankContext, args: GpuBenchArgs): Promise<GpuBenchSample> {
  const count = args.bytes / 4;
  const device = ctx.device;
  const a = Tensor.ones([count], 'float32', { device });
  const b = Tensor.zeros([count], 'float32', { device });
  const step =
    args.op === 'copy' ? async () => void b.copy_(a) : async () => void (await ctx.world.allReduce(a));
  await step(); // warm-up: kernels load, communicators form
  const times: number[] = [];
  for (let i = 0; i < args.iterations; i++) {
    await ctx.world.barrier();
    const started = performance.now();
    await step();
    times.push((performance.now() - started) * 1000);
  }
  times.sort((x, y) => x - y);
  const medianUs = times[Math.floor(times.length / 2)];
  const algbw = args.bytes / medianUs / 1000;
  const n = ctx.worldSize;
  return { medianUs, algbw, busbw: args.op === 'copy' ? algbw : (algbw * 2 * (n - 1)) / n };
}
