/**
 * allReduce over a TensorStore, in two shapes:
 * - small tensors: one exchange; every rank reads every peer's whole value and
 *   reduces all of it (in rank order, so every rank computes identical bits);
 * - large tensors: reduce-scatter then all-gather. Rank r reduces slice r by
 *   reading that slice of every peer's buffer in place (zero-copy in memory),
 *   then each rank copies the other reduced slices from their owners. Every
 *   rank reads and reduces 1/n of the data, in parallel.
 */

import { deviceScratch } from '../../cuda/device-memory.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { Exchange } from './exchange.ts';
import { copyElements, elements, reduceInto, sliceRange } from './slices.ts';

const ONE_EXCHANGE_MAX_BYTES = 64 << 10;

export async function allReduce(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  if (x.size === 1) {
    reduceInto(op, tensor, [tensor]);
    return;
  }
  if (tensor.nbytes <= ONE_EXCHANGE_MAX_BYTES) await allReduceOneExchange(x, tensor, op);
  else await allReduceScatterGather(x, tensor, op);
}

async function allReduceOneExchange(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  await x.publish(0, tensor, x.peers());
  const inputs = [];
  for (let p = 0; p < x.size; p++) inputs.push(p === x.rank ? tensor : await x.get(0, p));
  // Peers may be reading our buffer in place: reduce into a scratch copy first. On the host a plain
  // ArrayBuffer, because allocating (and collecting) a SharedArrayBuffer per call stalled small allReduces.
  const scratch =
    tensor.device === 'cpu'
      ? { tensor: Tensor.fromBuffer(new ArrayBuffer(tensor.nbytes), 0, tensor.shape, tensor.dtype) }
      : deviceScratch(tensor.device, tensor.shape, tensor.dtype, 'allReduce');
  try {
    reduceInto(op, scratch.tensor, inputs);
    for (const p of x.peers()) await x.finish(0, p);
    await x.consumed(0);
    copyElements(tensor, 0, scratch.tensor);
  } finally {
    if ('release' in scratch) scratch.release();
  }
}

async function allReduceScatterGather(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  const [start, end] = sliceRange(tensor.numel, x.size, x.rank);
  await x.publish(0, tensor, x.peers());
  const inputs = [];
  for (let p = 0; p < x.size; p++)
    inputs.push(elements(p === x.rank ? tensor : await x.get(0, p), start, end));
  // Only this rank reads its own slice, so it can be reduced in place.
  reduceInto(op, inputs[x.rank], inputs);
  for (const p of x.peers()) await x.finish(0, p);
  // Peers read their slices of our buffer in phase 0; only then may we overwrite them.
  await x.consumed(0);
  await x.publish(1, tensor, x.peers());
  for (const p of x.peers()) {
    const [s, e] = sliceRange(tensor.numel, x.size, p);
    copyElements(tensor, s, await x.get(1, p), s, e - s);
    await x.finish(1, p);
  }
  await x.consumed(1);
}
