/** Checks every communication call applies to the tensors it is handed (DESIGN.md: Tensor). */
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

export function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (typeof value === 'object') return `an object (${value.constructor?.name ?? 'Object'})`;
  return `${typeof value} ${String(value)}`;
}
