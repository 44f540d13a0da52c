/** Flat element ranges and copies that the store algorithms share (all tensors contiguous). */
import { itemSize, type TypedArray } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** The i-th of n near-equal contiguous ranges of `numel` elements (ceil-sized, trailing ones short). */
export function sliceRange(numel: number, n: number, i: number): [number, number] {
  const chunk = Math.ceil(numel / n);
  const start = Math.min(numel, i * chunk);
  return [start, Math.min(numel, start + chunk)];
}

export function elements(tensor: Tensor, start = 0, end = tensor.numel): TypedArray {
  return tensor.data.subarray(start, end) as TypedArray;
}

/** Copies `count` elements from `src` (starting at srcStart) into `dst` (starting at dstStart). */
export function copyElements(
  dst: Tensor,
  dstStart: number,
  src: Tensor,
  srcStart = 0,
  count = src.numel,
): void {
  const size = itemSize(dst.dtype);
  dst.bytes().set(src.bytes().subarray(srcStart * size, (srcStart + count) * size), dstStart * size);
}
