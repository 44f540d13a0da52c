/**
 * Flat element ranges, copies and reductions that the store algorithms share
 * (all tensors contiguous). Host tensors take the typed-array paths; tensors
 * on a GPU (ranks sharing one device) take the device's copies and kernels.
 */

import { reduceOnDevice } from '../../cuda/device-reduce.ts';
import { CollectiveMismatchError } from '../../runtime/errors.ts';
import { itemSize } from '../../tensor/dtype.ts';
import { reduceArrays } from '../../tensor/reduce-kernels.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { copyInto } from '../../tensor/shared-copy.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** The i-th of n near-equal contiguous ranges of `numel` elements (ceil-sized, trailing ones short). */
export function sliceRange(numel: number, n: number, i: number): [number, number] {
  const chunk = Math.ceil(numel / n);
  const start = Math.min(numel, i * chunk);
  return [start, Math.min(numel, start + chunk)];
}

/** Elements [start, end) of a contiguous tensor as a flat view. */
export function elements(tensor: Tensor, start = 0, end = tensor.numel): Tensor {
  return tensor.reshape([tensor.numel]).narrow(0, start, end - start);
}

/** `input` cut into `count` consecutive slices of `output`'s shape (a reduceScatterTensor's parts). */
export function slicesLike(input: Tensor, output: Tensor, count: number): Tensor[] {
  const n = output.numel;
  return Array.from({ length: count }, (_, p) => elements(input, p * n, (p + 1) * n).reshape(output.shape));
}

/** Copies `count` elements from `src` (starting at srcStart) into `dst` (starting at dstStart). */
export function copyElements(
  dst: Tensor,
  dstStart: number,
  src: Tensor,
  srcStart = 0,
  count = src.numel,
): void {
  if (dst.device === 'cpu' && src.device === 'cpu') {
    const size = itemSize(dst.dtype);
    copyInto(dst.bytes(), src.bytes().subarray(srcStart * size, (srcStart + count) * size), dstStart * size);
    return;
  }
  elements(dst, dstStart, dstStart + count).copy_(elements(src, srcStart, srcStart + count));
}

/**
 * out = op(inputs...), element-wise in input order, so every rank computes
 * identical bits. `out` may be one of the inputs. All live on one device: a
 * peer whose tensor is elsewhere called the collective differently.
 */
export function reduceInto(op: ReduceOp, out: Tensor, inputs: readonly Tensor[]): void {
  const stray = inputs.findIndex((t) => t.device !== out.device);
  if (stray !== -1) {
    throw new CollectiveMismatchError(
      `input ${stray} of the reduction is on ${inputs[stray].device} but the result is on ${out.device}: ` +
        'every rank of a collective must pass tensors on the same kind of device',
    );
  }
  if (out.device === 'cpu') {
    reduceArrays(
      op,
      out.dtype,
      out.data,
      inputs.map((t) => t.data),
    );
  } else {
    reduceOnDevice(op, out, inputs);
  }
}
