/** allGather and reduceScatter over a TensorStore: every rank reads its peers' buffers in place. */

import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Exchange } from './exchange.ts';
import { copyElements, elements, reduceInto } from './slices.ts';

/** Gathers every rank's input into place p of the output, as `place(p, value)` decides. */
async function gatherEach(
  x: Exchange,
  input: Tensor,
  place: (p: number, value: Tensor) => void,
): Promise<void> {
  place(x.rank, input);
  await x.readAll(0, input, place);
}

export function allGather(x: Exchange, outputs: readonly Tensor[], input: Tensor): Promise<void> {
  return gatherEach(x, input, (p, value) => copyElements(outputs[p], 0, value));
}

export function allGatherInto(x: Exchange, output: Tensor, input: Tensor): Promise<void> {
  return gatherEach(x, input, (p, value) => copyElements(output, p * input.numel, value));
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
  const start = x.rank * output.numel;
  await x.publishOperand(0, input, x.peers());
  const parts = [];
  for (let q = 0; q < x.size; q++) {
    parts.push(elements(q === x.rank ? input : await x.get(0, q), start, start + output.numel));
  }
  reduceInto(op, output, parts);
  for (const q of x.peers()) await x.finish(0, q);
  await x.consumed(0);
}
