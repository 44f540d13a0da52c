/**
 * allToAll over a TensorStore: one value per (producer, consumer) pair,
 * landed in its output where the store can write it there (landIn), else
 * copied there from where its consumer reads it.
 */
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import { copyElements } from './slices.ts';

/** inputs[p] goes to rank p; what arrives from rank q lands in outputs[q]. */
export async function allToAll(
  x: Exchange,
  outputs: readonly Tensor[],
  inputs: readonly Tensor[],
): Promise<void> {
  for (const q of x.peers()) x.landIn(0, q, outputs[q], x.rank);
  for (const p of x.peers()) await x.publish(0, inputs[p], [p], p);
  copyElements(outputs[x.rank], 0, inputs[x.rank]);
  for (const q of x.peers()) {
    const part = await x.get(0, q, x.rank);
    x.expectLike(part, outputs[q], q);
    landOrCopy(outputs[q], part);
    await x.finish(0, q, x.rank);
  }
  for (const p of x.peers()) await x.consumed(0, p);
}

/** Splits of dim 0 as views (dim-0 slices of a contiguous tensor stay contiguous). */
export function splitRows(tensor: Tensor, splits: readonly number[]): Tensor[] {
  let row = 0;
  return splits.map((rows) => {
    const part = tensor.narrow(0, row, rows);
    row += rows;
    return part;
  });
}
