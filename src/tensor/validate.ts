/** Checks every communication call applies to the tensors it is handed (a non-contiguous tensor is a TypeError naming the call). */
import { Tensor } from './tensor.ts';

export function assertCommTensor(tensor: unknown, where: string): asserts tensor is Tensor {
  if (!(tensor instanceof Tensor)) {
    throw new TypeError(`${where}: expected a Tensor, got ${describeValue(tensor)}`);
  }
  if (!tensor.isContiguous()) {
    throw new TypeError(
      `${where}: tensor ${tensor.describe()} is not contiguous (strides [${tensor.strides.join(',')}]); call .contiguous() first`,
    );
  }
}

/** What assertCommTensor accepts, checked without building its message: for loops over many tensors. */
export function isCommTensor(tensor: unknown): tensor is Tensor {
  return tensor instanceof Tensor && tensor.isContiguous();
}

/** The tensors of a views message (sendViews, srcSetViews): an array of contiguous host tensors; returns their bytes. */
export function assertHostTensors(tensors: unknown, where: string): number {
  if (!Array.isArray(tensors)) throw new TypeError(`${where}: tensors must be an array of Tensors`);
  let bytes = 0;
  for (let i = 0; i < tensors.length; i++) {
    const t: unknown = tensors[i];
    // The name is built only for a bad tensor: a views message may carry thousands.
    if (!isCommTensor(t)) assertCommTensor(t, `${where}: tensors[${i}]`);
    if (t.device !== 'cpu')
      throw new TypeError(`${where}: tensors[${i}] is on ${t.device}; views are of host memory`);
    bytes += t.nbytes;
  }
  return bytes;
}

export function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (typeof value === 'object') return `an object (${value.constructor?.name ?? 'Object'})`;
  return `${typeof value} ${String(value)}`;
}
