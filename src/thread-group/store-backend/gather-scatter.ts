/**
 * allGather and reduceScatter over a TensorStore: allGather's values land in
 * the outputs where the store can write them there, reduceScatter reads its
 * peers' buffers in place.
 */

import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { gatherAcrossNodes } from './all-gather-nodes.ts';
import { ONE_EXCHANGE_MAX_BYTES } from './all-reduce.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import { worthTwoLevels } from './node-layout.ts';
import { copyElements, elements, reduceInto } from './slices.ts';

/**
 * Gathers every rank's input into `into(p)`, a tensor of the input's shape
 * in the output. Peers' values land there where the store can write them in
 * place (landIn: straight out of a peer process's memory, or off the
 * socket), and are copied there otherwise.
 */
async function gatherEach(
  x: Exchange,
  input: Tensor,
  into: (p: number) => Tensor,
  nodes: number[][] | undefined,
): Promise<void> {
  const places = Array.from({ length: x.size }, (_, p) => into(p));
  // Large pieces of a group spanning nodes cross to each other node once. The pieces' size is the same on
  // every rank that called alike; one that did not is told at once by either path's first exchange, in
  // which every rank reads every other's signature.
  if (worthTwoLevels(nodes) && input.nbytes > ONE_EXCHANGE_MAX_BYTES) {
    await x.compareCalls();
    return gatherAcrossNodes(x, input, places, nodes);
  }
  copyElements(places[x.rank], 0, input);
  for (const p of x.peers()) x.landIn(0, p, places[p]);
  await x.readAll(0, input, (p, value) => landOrCopy(places[p], value));
}

/** `nodes`: which ranks share a node (node-layout.ts), undefined where the store does not span nodes. */
export function allGather(
  x: Exchange,
  outputs: readonly Tensor[],
  input: Tensor,
  nodes: number[][] | undefined,
): Promise<void> {
  return gatherEach(x, input, (p) => outputs[p], nodes);
}

export function allGatherInto(
  x: Exchange,
  output: Tensor,
  input: Tensor,
  nodes: number[][] | undefined,
): Promise<void> {
  const n = input.numel;
  return gatherEach(x, input, (p) => elements(output, p * n, (p + 1) * n).reshape(input.shape), nodes);
}

export async function reduceScatter(
  x: Exchange,
  output: Tensor,
  inputs: readonly Tensor[],
  op: ReduceOp,
): Promise<void> {
  for (const p of x.peers()) await x.publishOperand(0, inputs[p], [p], p);
  const parts = [];
  for (let q = 0; q < x.size; q++) {
    if (q === x.rank) {
      parts.push(inputs[q]);
      continue;
    }
    const part = await x.get(0, q, x.rank);
    x.expectLike(part, output, q);
    parts.push(part);
  }
  reduceInto(op, output, parts);
  for (const q of x.peers()) await x.finish(0, q, x.rank);
  for (const p of x.peers()) await x.consumed(0, p);
}

export async function reduceScatterTensor(
  x: Exchange,
  output: Tensor,
  input: Tensor,
  op: ReduceOp,
): Promise<void> {
  const n = output.numel;
  const start = x.rank * n;
  await x.publishOperand(0, input, x.peers());
  const parts = [];
  for (let q = 0; q < x.size; q++) {
    parts.push(elements(q === x.rank ? input : await x.get(0, q), start, start + n));
  }
  reduceInto(op, output, parts);
  for (const q of x.peers()) await x.finish(0, q);
  await x.consumed(0);
}
