/**
 * Test vectors for the reduction kernels: random inputs (special values
 * included) for every op and dtype of the kernel contract, with the outputs
 * reduceArrays computes, in the binary layout the self-test reads
 * (selftest/kernels.cpp, test_kernel_vectors). The kernels must give the same
 * bits, NaN payloads aside.
 */

import { reduceKernelName } from '../../src/cuda/api.ts';
import { arrayConstructor, DTYPES, type DType, itemSize, type TypedArray } from '../../src/tensor/dtype.ts';
import { float32ToBfloat16Bits, float32ToFloat16Bits } from '../../src/tensor/half.ts';
import {
  isReduceOpDefined,
  REDUCE_OPS,
  type ReduceOp,
  reduceArrays,
} from '../../src/tensor/reduce-kernels.ts';
import { mulberry32 } from '../fixtures/mulberry32.ts';

const SPECIAL_FLOATS = [
  Number.NaN,
  0,
  -0,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  1e-40,
  -3e38,
  65504,
];

function randomArray(dtype: DType, n: number, random: () => number): TypedArray {
  const array = new (arrayConstructor(dtype))(n);
  for (let i = 0; i < n; i++) {
    const pick = random();
    if (dtype === 'float64' || dtype === 'float32') {
      const value =
        pick < 0.1
          ? SPECIAL_FLOATS[Math.floor(random() * SPECIAL_FLOATS.length)]
          : (random() - 0.5) * 2 ** (random() * 40 - 20);
      (array as Float64Array)[i] = value;
    } else if (dtype === 'float16' || dtype === 'bfloat16') {
      // Any 16-bit word, NaNs, infinities and subnormals included, or a small value that sums near a tie.
      const encode = dtype === 'float16' ? float32ToFloat16Bits : float32ToBfloat16Bits;
      (array as Uint16Array)[i] = pick < 0.5 ? Math.floor(random() * 65536) : encode((random() - 0.5) * 8);
    } else if (dtype === 'int64') {
      (array as BigInt64Array)[i] = BigInt.asIntN(
        64,
        (BigInt(Math.floor(random() * 2 ** 32)) << 32n) | BigInt(Math.floor(random() * 2 ** 32)),
      );
    } else if (dtype === 'bool') {
      // Tensor stores 0/1, but the ops work on raw bytes, which is what the kernels must match.
      (array as Uint8Array)[i] = pick < 0.9 ? Math.floor(random() * 2) : Math.floor(random() * 4);
    } else {
      (array as Int32Array)[i] = Math.floor(random() * 2 ** 32) | 0; // the typed array wraps it to its width
    }
  }
  return array;
}

function validOps(dtype: DType): ReduceOp[] {
  return REDUCE_OPS.filter((op) => isReduceOpDefined(op, dtype));
}

function bytes(array: TypedArray): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

/** The vectors file's bytes: for every (op, dtype), cases of 1, 2, 3 and 5 inputs of `n` elements. */
export function kernelVectors(n = 257, seed = 20240611): Uint8Array {
  const random = mulberry32(seed);
  const chunks: Uint8Array[] = [];
  const u32 = (value: number) => {
    const chunk = new Uint8Array(4);
    new DataView(chunk.buffer).setUint32(0, value, true);
    chunks.push(chunk);
  };
  let cases = 0;
  for (const dtype of DTYPES) {
    for (const op of validOps(dtype)) {
      for (const count of [1, 2, 3, 5]) {
        const inputs = Array.from({ length: count }, () => randomArray(dtype, n, random));
        const expected = new (arrayConstructor(dtype))(n);
        reduceArrays(op, dtype, expected, inputs);
        const name = new TextEncoder().encode(reduceKernelName(op, dtype));
        u32(name.length);
        chunks.push(name);
        u32(itemSize(dtype));
        u32(count);
        const length = new Uint8Array(8);
        new DataView(length.buffer).setBigUint64(0, BigInt(n), true);
        chunks.push(length);
        for (const input of inputs) chunks.push(bytes(input));
        chunks.push(bytes(expected));
        cases++;
      }
    }
  }
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, cases, true);
  return Buffer.concat([header, ...chunks]);
}
