/**
 * The rank of the steadiness bench: a 2-rank 4 B send/recv round trip in a
 * plain user loop (`await send; await recv`), timed in blocks from the job's
 * first call. Rank 0 returns each block's mean round trip in microseconds.
 */
import { type RankContext, Tensor } from '../src/index.ts';

export interface SteadinessArgs {
  blocks: number;
  blockSize: number;
}

export default async function main(
  ctx: RankContext,
  { blocks, blockSize }: SteadinessArgs,
): Promise<number[]> {
  const t = Tensor.zeros([1]);
  const peer = 1 - ctx.rank;
  const means: number[] = [];
  for (let block = 0; block < blocks; block++) {
    const started = performance.now();
    for (let i = 0; i < blockSize; i++) {
      if (ctx.rank === 0) {
        await ctx.world.send(t, peer);
        await ctx.world.recv(t, peer);
      } else {
        await ctx.world.recv(t, peer);
        await ctx.world.send(t, peer);
      }
    }
    means.push(((performance.now() - started) * 1000) / blockSize);
  }
  return means;
}
