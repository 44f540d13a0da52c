/**
 * Rank entry of the cold-calls bench: from the job's first call on, 4 B
 * send/recv round trips between ranks 0 and 1 (`roundTrip`) or allReduces of
 * one float32 tensor (`allReduce`), in a plain `await` loop as a user's job
 * makes them. The clock is read only at the given call counts; rank 0
 * returns the milliseconds from the first call to the end of each.
 */
import { type RankContext, Tensor } from '../src/index.ts';

export interface ColdCallsArgs {
  op: 'roundTrip' | 'allReduce';
  elements: number;
  /** Ascending call counts to read the clock at; the last is the job's number of calls. */
  counts: number[];
}

export default async function main(
  ctx: RankContext,
  { op, elements, counts }: ColdCallsArgs,
): Promise<number[]> {
  const t = Tensor.full([elements], 1, 'float32');
  const world = ctx.world;
  const peer = 1 - ctx.rank;
  const at: number[] = [];
  const started = performance.now();
  for (let call = 1, k = 0; k < counts.length; call++) {
    if (op === 'allReduce') await world.allReduce(t);
    else if (ctx.rank === 0) {
      await world.send(t, peer);
      await world.recv(t, peer);
    } else if (ctx.rank === 1) {
      await world.recv(t, peer);
      await world.send(t, peer);
    }
    if (call === counts[k]) at[k++] = performance.now() - started;
  }
  return at;
}
