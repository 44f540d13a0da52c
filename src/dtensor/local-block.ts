/**
 * What each mesh coordinate holds of a global tensor. A mesh dimension that
 * shards tensor dim d chunks what the earlier mesh dimensions left of d, with
 * torch.chunk semantics: ceil(n / k) per piece, trailing pieces short or
 * empty. Pure layout math: no communication.
 */
import { isFloatingDType } from '../tensor/dtype.ts';
import type { ReduceOp } from '../tensor/reduce-ops.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { Placement } from './placement.ts';

export interface Span {
  offset: number;
  length: number;
}

/** Piece `index` of `parts` when `size` entries are chunked. */
export function chunkSpan(size: number, parts: number, index: number): Span {
  const piece = Math.ceil(size / parts);
  const offset = Math.min(index * piece, size);
  return { offset, length: Math.min(piece, size - offset) };
}

/** Per tensor dim, the span mesh coordinate `coord` holds, applying mesh dims before `upTo` only. */
export function blockOf(
  shape: readonly number[],
  placements: readonly Placement[],
  meshShape: readonly number[],
  coord: readonly number[],
  upTo = placements.length,
): Span[] {
  const spans = shape.map((length) => ({ offset: 0, length }));
  for (let m = 0; m < upTo; m++) {
    const p = placements[m];
    if (p.kind !== 'shard') continue;
    const outer = spans[p.dim];
    const inner = chunkSpan(outer.length, meshShape[m], coord[m]);
    spans[p.dim] = { offset: outer.offset + inner.offset, length: inner.length };
  }
  return spans;
}

export function viewOf(tensor: Tensor, spans: readonly Span[]): Tensor {
  return spans.reduce((t, s, d) => t.narrow(d, s.offset, s.length), tensor);
}

/**
 * The term index `index` of `parts` holds when a replicated value becomes
 * Partial(op): for idempotent ops the value itself; for a floating sum the
 * value / parts (as torch does); otherwise (integer sum, prod, bxor) the
 * value at index 0 and the op's identity elsewhere, which stays exact.
 */
export function partitionValue(value: Tensor, op: ReduceOp, parts: number, index: number): Tensor {
  switch (op) {
    case 'avg':
    case 'min':
    case 'max':
    case 'band':
    case 'bor':
      return value;
    case 'sum':
      if (isFloatingDType(value.dtype)) {
        return Tensor.fromArray(
          value.toArray().map((v) => v / parts),
          value.shape,
          value.dtype,
        );
      }
      return index === 0 ? value : Tensor.zeros(value.shape, value.dtype);
    case 'bxor':
      return index === 0 ? value : Tensor.zeros(value.shape, value.dtype);
    case 'prod':
      return index === 0 ? value : Tensor.ones(value.shape, value.dtype);
  }
}

/** A fresh contiguous copy of what mesh coordinate `coord` holds of `full` under `placements`. */
export function localBlock(
  full: Tensor,
  placements: readonly Placement[],
  meshShape: readonly number[],
  coord: readonly number[],
): Tensor {
  let local = viewOf(full, blockOf(full.shape, placements, meshShape, coord)).clone();
  placements.forEach((p, m) => {
    if (p.kind === 'partial') local = partitionValue(local, p.op, meshShape[m], coord[m]);
  });
  return local;
}
