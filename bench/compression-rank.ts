/**
 * Rank entry of the compression bench: worker "sender" sends each tensor to
 * worker "receiver" over the emulated link `rounds` times; each round ends
 * with a one-byte acknowledgement, so the time covers compression, the
 * emulated wire, delivery and decompression.
 */
import { type RankContext, Tensor } from '../src/index.ts';

export interface CompressionRankArgs {
  numel: number;
  rounds: number;
}

export interface CompressionSample {
  tensor: 'sparse' | 'random';
  seconds: number;
  wireBytes: number;
}

/** bfloat16 words: 90% zeros (sparse) or all random (random); xorshift, so every run sends the same bytes. */
export function benchTensor(kind: 'sparse' | 'random', numel: number): Tensor {
  const t = Tensor.empty([numel], 'bfloat16');
  const words = t.data as Uint16Array;
  let x = 0x9e3779b9;
  for (let i = 0; i < numel; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const r = x >>> 0;
    if (kind === 'random' || r % 10 === 0) words[i] = (r >>> 8) & 0xffff;
  }
  return t;
}

export default async function main(
  ctx: RankContext,
  args: CompressionRankArgs,
): Promise<CompressionSample[]> {
  const g = await ctx.collective.createCollectiveGroup(['sender', 'receiver']);
  const samples: CompressionSample[] = [];
  for (const kind of ['sparse', 'random'] as const) {
    const t = ctx.name === 'sender' ? benchTensor(kind, args.numel) : undefined;
    const times: number[] = [];
    for (let round = 0; round < args.rounds; round++) {
      const started = performance.now();
      if (t) {
        await g.send(t);
        await g.recv();
      } else {
        await g.recv();
        await g.send(0);
      }
      times.push((performance.now() - started) / 1000);
    }
    const last = ctx.collective.networkReport()?.transfers.at(-1);
    samples.push({ tensor: kind, seconds: Math.min(...times), wireBytes: t ? (last?.wireBytes ?? 0) : 0 });
  }
  return samples;
}
