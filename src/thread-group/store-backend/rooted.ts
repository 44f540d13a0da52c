/**
 * One-to-all and all-to-one collectives over a TensorStore: broadcast,
 * reduce, gather, scatter. What a rank receives lands in its place where the
 * store can write it there (landIn), else is copied there.
 */

import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, FINGERPRINT, landOrCopy } from './exchange.ts';
import { copyElements, reduceInto } from './slices.ts';

export async function broadcast(x: Exchange, tensor: Tensor, src: number): Promise<void> {
  if (x.size === 1) return;
  if (x.rank === src) {
    await x.publish(0, tensor, x.peers());
    await x.consumed(0);
    return;
  }
  x.landIn(0, src, tensor);
  landOrCopy(tensor, await x.get(0, src));
  await x.finish(0, src);
}

/**
 * Broadcast with the fingerprint check folded into its one exchange: every
 * rank reads every other's phase-0 value, the root's being the data and the
 * others' empty, so a rank that disagrees on the root costs no extra round.
 */
export async function broadcastCompared(x: Exchange, tensor: Tensor, src: number): Promise<void> {
  if (x.size === 1) return;
  // A non-root publishes an empty value, so the root's may land in its tensor.
  if (x.rank !== src) x.landIn(0, src, tensor);
  await x.readAll(0, x.rank === src ? tensor : FINGERPRINT, (p, value) => {
    if (p === src) landOrCopy(tensor, value);
  });
}

/** Non-roots' tensors are left as they were (gloo's behaviour); the root holds the reduction. */
export async function reduce(x: Exchange, tensor: Tensor, dst: number, op: ReduceOp): Promise<void> {
  if (x.rank !== dst) {
    await x.publishOperand(0, tensor, [dst]);
    await x.consumed(0);
    return;
  }
  const inputs = [];
  for (let p = 0; p < x.size; p++) inputs.push(p === x.rank ? tensor : await x.get(0, p));
  reduceInto(op, tensor, inputs);
  for (const p of x.peers()) await x.finish(0, p);
}

export async function gather(
  x: Exchange,
  tensor: Tensor,
  dst: number,
  gatherList: readonly Tensor[] | undefined,
): Promise<void> {
  if (x.rank !== dst) {
    await x.publish(0, tensor, [dst]);
    await x.consumed(0);
    return;
  }
  const list = gatherList!;
  copyElements(list[x.rank], 0, tensor);
  for (const p of x.peers()) x.landIn(0, p, list[p]);
  for (const p of x.peers()) {
    landOrCopy(list[p], await x.get(0, p));
    await x.finish(0, p);
  }
}

export async function scatter(
  x: Exchange,
  tensor: Tensor,
  src: number,
  scatterList: readonly Tensor[] | undefined,
): Promise<void> {
  if (x.rank !== src) {
    x.landIn(0, src, tensor, x.rank);
    landOrCopy(tensor, await x.get(0, src, x.rank));
    await x.finish(0, src, x.rank);
    return;
  }
  const list = scatterList!;
  for (const p of x.peers()) await x.publish(0, list[p], [p], p);
  copyElements(tensor, 0, list[x.rank]);
  for (const p of x.peers()) await x.consumed(0, p);
}
