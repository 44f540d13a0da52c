/**
 * premulSum over a TensorStore: each rank multiplies its own inputs by its
 * factor into copies, then the call runs as a sum over the copies. Copies,
 * because the caller's inputs must stay as they were (reduce leaves non-roots'
 * tensors alone, reduceScatter never writes its inputs) and peers read what a
 * rank publishes in place. The product is the prod kernel's, so host and
 * device tensors go the way every reduction goes, and each element rounds once
 * to the dtype (the factor taken in the dtype, as NCCL takes it).
 */
import { Tensor } from '../../tensor/tensor.ts';
import { reduceInto } from './slices.ts';

export function premultiplied(tensor: Tensor, factor: number): Tensor {
  const scaled = Tensor.full(tensor.shape, factor, tensor.dtype, { device: tensor.device });
  reduceInto('prod', scaled, [scaled, tensor]);
  return scaled;
}
