/**
 * allReduce over a TensorStore, in two shapes:
 * - small tensors: one exchange; every rank reads every peer's whole value and
 *   reduces all of it (in rank order, so every rank computes identical bits);
 * - large tensors: reduce-scatter then all-gather. Every rank publishes slice p
 *   of its tensor for peer p (a view: zero-copy in memory), reduces its own
 *   slice from every peer's, then publishes it for all and copies the others'
 *   reduced slices. Every rank sends, reads and reduces 1/n of the data, in
 *   parallel: bandwidth-optimal, like gloo's ring, in two rounds.
 *   Where the store copies values rather than lending views of them (between
 *   processes) and can land them in place, the same two rounds go in chunks
 *   (all-reduce-pipelined.ts), so copying, reducing and landing overlap
 *   instead of following one another; a small tensor has too little to
 *   overlap to pay for the extra exchange.
 */

import { deviceScratch } from '../../cuda/device-memory.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { allReducePipelined } from './all-reduce-pipelined.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import { worthPipelining } from './reduce-scatter-pipelined.ts';
import { copyElements, elements, reduceInto, sliceRange } from './slices.ts';

export const ONE_EXCHANGE_MAX_BYTES = 64 << 10;

export async function allReduce(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  if (x.size === 1) {
    reduceInto(op, tensor, [tensor]);
    return;
  }
  if (tensor.nbytes <= ONE_EXCHANGE_MAX_BYTES) await allReduceOneExchange(x, tensor, op);
  else if (worthPipelining(x, tensor, tensor.nbytes)) await allReducePipelined(x, tensor, op);
  else await allReduceScatterGather(x, tensor, op);
}

async function allReduceOneExchange(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  await x.publishOperand(0, tensor, x.peers());
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
    // Every peer compared our signature and we theirs: where the store copied our value, it is free.
    await x.released(0);
    copyElements(tensor, 0, scratch.tensor);
  } finally {
    if ('release' in scratch) scratch.release();
  }
}

async function allReduceScatterGather(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  // Data values go to one peer each (a slice, not the whole tensor: across nodes every byte travels),
  // so the call's signatures are compared in an exchange of their own first.
  await x.compareCalls();
  const slice = (p: number) => elements(tensor, ...sliceRange(tensor.numel, x.size, p));
  // Each peer's reduced slice may land where it goes: the peer sends it only after it read, from that
  // very place, what this rank sends it below.
  for (const p of x.peers()) x.landIn(1, p, slice(p));
  for (const p of x.peers()) await x.publishOperand(0, slice(p), [p], p);
  const mine = slice(x.rank);
  const inputs = [];
  for (let p = 0; p < x.size; p++) inputs.push(p === x.rank ? mine : await x.get(0, p, x.rank));
  // Peers read only their own slices of our buffer, so ours can be reduced in place.
  reduceInto(op, mine, inputs);
  for (const p of x.peers()) await x.finish(0, p, x.rank);
  for (const p of x.peers()) await x.consumed(0, p);
  await x.publish(1, mine, x.peers());
  for (const p of x.peers()) {
    const reduced = await x.get(1, p);
    landOrCopy(slice(p), reduced);
    await x.finish(1, p);
  }
  await x.consumed(1);
}
