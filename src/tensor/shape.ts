/** Shape and stride arithmetic shared by the Tensor factories and views. */
import { constants } from 'node:buffer';
import { type DType, itemSize } from './dtype.ts';

/** A shape, or a plain length for a 1-D tensor (`Tensor.zeros(4)`). */
export type ShapeLike = number | readonly number[];

/** Typed arrays index with 32-bit lengths on Node 20; capping here keeps every tensor viewable by `.data`. */
const MAX_ELEMENTS = 2 ** 32;
/** `.bytes()` is a Uint8Array, so nbytes is bounded by the longest typed array the runtime can build. */
const MAX_BYTES: number = constants.MAX_LENGTH;

export function describeLayout(dtype: DType, shape: readonly number[]): string {
  return `${dtype}[${shape.join(',')}]`;
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((size, d) => size === b[d]);
}

export function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (const size of shape) n *= size;
  return n;
}

/** Validates a user-supplied shape and returns it as a fresh array (callers freeze or mutate it). */
export function checkShape(shape: unknown, where: string, what = 'shape'): number[] {
  if (typeof shape === 'number') return checkShape([shape], where, what);
  if (!Array.isArray(shape)) {
    throw new TypeError(`${where}: ${what} must be an array of non-negative integers, got ${typeof shape}`);
  }
  const dims = new Array<number>(shape.length);
  for (let d = 0; d < shape.length; d++) {
    const size: unknown = shape[d];
    // The message is built only for a bad size: shapes are checked on every tensor made.
    dims[d] = isIndex(size) ? size : checkIndex(size, where, `${what}[${d}]`);
  }
  return dims;
}

function isIndex(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** A non-negative safe integer (sizes, strides, offsets, lengths). */
export function checkIndex(value: unknown, where: string, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    throw new TypeError(`${where}: ${what} must be a non-negative integer, got ${String(value)}`);
  }
  if (value < 0) throw new RangeError(`${where}: ${what} must be non-negative, got ${value}`);
  return value;
}

/** Refuses layouts a typed array could not address, before anything is allocated. */
export function checkSize(shape: readonly number[], dtype: DType, where: string): void {
  const numel = numelOf(shape);
  if (numel > MAX_ELEMENTS) {
    throw new RangeError(
      `${where}: ${describeLayout(dtype, shape)} has ${numel} elements; a tensor holds at most 2^32 (the typed array limit)`,
    );
  }
  const nbytes = numel * itemSize(dtype);
  if (nbytes > MAX_BYTES) {
    throw new RangeError(
      `${where}: ${describeLayout(dtype, shape)} needs ${nbytes} bytes; this runtime's buffers hold at most ${MAX_BYTES}`,
    );
  }
}

export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let stride = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

export function isContiguousLayout(shape: readonly number[], strides: readonly number[]): boolean {
  if (numelOf(shape) === 0) return true;
  let expected = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] === 1) continue;
    if (strides[d] !== expected) return false;
    expected *= shape[d];
  }
  return true;
}

/** Elements from the first addressed element to the last one, inclusive (0 for an empty tensor). */
export function spanOf(shape: readonly number[], strides: readonly number[]): number {
  if (numelOf(shape) === 0) return 0;
  let last = 0;
  for (let d = 0; d < shape.length; d++) last += (shape[d] - 1) * strides[d];
  return last + 1;
}

/** Element offset of the `index`-th element in row-major order. */
export function offsetOf(index: number, shape: readonly number[], strides: readonly number[]): number {
  let offset = 0;
  for (let d = shape.length - 1; d >= 0; d--) {
    offset += (index % shape[d]) * strides[d];
    index = Math.floor(index / shape[d]);
  }
  return offset;
}

/** Wraps a possibly negative dim (-1 = last) into [0, ndim). */
export function normalizeDim(dim: unknown, ndim: number, where: string, what = 'dim'): number {
  if (typeof dim !== 'number' || !Number.isInteger(dim)) {
    throw new TypeError(`${where}: ${what} must be an integer, got ${String(dim)}`);
  }
  if (ndim === 0) throw new RangeError(`${where}: a 0-dim tensor has no ${what} ${dim}`);
  if (dim < -ndim || dim >= ndim) {
    throw new RangeError(
      `${where}: ${what} ${dim} is out of range for a tensor with ${ndim} dims (expected ${-ndim}..${ndim - 1})`,
    );
  }
  return dim < 0 ? dim + ndim : dim;
}

/** Resolves a target shape holding `numel` elements; one entry may be -1 and is inferred. */
export function inferShape(shape: unknown, numel: number, where: string): number[] {
  const sizes = typeof shape === 'number' ? [shape] : shape;
  if (!Array.isArray(sizes))
    throw new TypeError(`${where}: shape must be an array of integers, got ${typeof shape}`);
  const inferred = sizes.indexOf(-1);
  if (inferred !== -1 && sizes.indexOf(-1, inferred + 1) !== -1) {
    throw new RangeError(`${where}: only one dimension of shape [${sizes.join(',')}] may be -1`);
  }
  const out = checkShape(
    sizes.map((size) => (size === -1 ? 0 : size)),
    where,
  );
  if (inferred !== -1) {
    const size = numel / numelOf(out.filter((_, d) => d !== inferred));
    if (!Number.isInteger(size)) {
      throw new RangeError(
        `${where}: cannot infer the -1 in shape [${sizes.join(',')}] for ${numel} elements`,
      );
    }
    out[inferred] = size;
  }
  if (numelOf(out) !== numel) {
    throw new RangeError(`${where}: shape [${sizes.join(',')}] does not hold exactly ${numel} elements`);
  }
  return out;
}
