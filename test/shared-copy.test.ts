/**
 * The SIMD reductions copy large blocks of shared memory in and out of wasm
 * memory, and collectives between tensors, through the copy an upper layer
 * registers (libc's memcpy, runtime/native-copy.ts), and everything else
 * through TypedArray.set: the
 * results are the same bits either way, for every dtype and op.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { registerLibcCopy } from '../src/runtime/native-copy.ts';
import { arrayConstructor, DTYPES, type DType, type TypedArray } from '../src/tensor/dtype.ts';
import { isReduceOpDefined, REDUCE_OPS, reduceArrays } from '../src/tensor/reduce-kernels.ts';
import {
  type BlockCopy,
  copyBytes,
  copyInto,
  NATIVE_COPY_MIN_BYTES,
  registerSharedCopy,
} from '../src/tensor/shared-copy.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { copyElements } from '../src/thread-group/store-backend/slices.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';

// What runtime/native-copy.ts registers when imported; restored after each check that registers another.
afterAll(registerLibcCopy);

/** Random bytes in a tensor's storage (shared memory, as every host tensor's), as an array of the dtype. */
function sharedRandomArray(dtype: DType, length: number, seed: number): TypedArray {
  const array = Tensor.zeros([length], dtype).data;
  const random = mulberry32(seed);
  const view = bytesOf(array);
  // bool lanes hold 0 or 1.
  for (let i = 0; i < view.length; i++)
    view[i] = dtype === 'bool' ? (random() < 0.5 ? 0 : 1) : (random() * 256) | 0;
  return array;
}

function bytesOf(x: TypedArray): Uint8Array {
  return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
}

/** A registered copy that counts its calls and copies as TypedArray.set would. */
function countingCopy(): { calls: number; copy: BlockCopy } {
  const counter = {
    calls: 0,
    copy: (target: Uint8Array, source: Uint8Array, length: number) => {
      counter.calls++;
      target.set(source.subarray(0, length));
    },
  };
  return counter;
}

describe('copies of shared memory', () => {
  it('go through the registered copy for large shared blocks only, asked for once', () => {
    const counter = countingCopy();
    let asked = 0;
    registerSharedCopy(() => {
      asked++;
      return counter.copy;
    });
    const large = NATIVE_COPY_MIN_BYTES;
    const shared = new Uint8Array(new SharedArrayBuffer(2 * large)).fill(7);
    const plain = new Uint8Array(2 * large);
    copyInto(plain, shared.subarray(0, large), large);
    copyInto(shared, plain.subarray(0, large));
    expect([counter.calls, asked]).toEqual([2, 1]);
    expect(plain.subarray(large).every((b) => b === 7)).toBe(true);
    copyInto(plain, shared.subarray(0, large - 1));
    copyInto(new Uint8Array(2 * large), plain.subarray(0, large));
    expect(counter.calls).toBe(2);
    expect(() => copyInto(plain, shared, 1)).toThrow(RangeError);
    registerLibcCopy();
  });

  it('a SIMD reduction copies every block of shared tensors in and out through the registered copy', () => {
    const counter = countingCopy();
    registerSharedCopy(() => counter.copy);
    const [a, b] = [1, 2].map((k) => {
      const x = Tensor.zeros([2 * 16384], 'float32').data as Float32Array;
      for (let i = 0; i < x.length; i++) x[i] = (i % 1000) * k;
      return x;
    });
    const expected = a.map((x, i) => x + b[i]);
    reduceArrays('sum', 'float32', a, [a, b]);
    registerLibcCopy();
    // Two 64 KiB blocks: each loaded, folded with b's, and stored.
    expect(counter.calls).toBe(6);
    expect(a).toEqual(expected);
  });

  it("a collective's copy between tensors goes through the registered copy, at its offsets", () => {
    const counter = countingCopy();
    registerSharedCopy(() => counter.copy);
    const source = Tensor.arange(3 * 8192, 'float32');
    const target = Tensor.zeros([4 * 8192], 'float32');
    // 8192 float32s (32 KiB) of the source's second third into the target's last quarter.
    copyElements(target, 3 * 8192, source, 8192, 8192);
    registerLibcCopy();
    expect(counter.calls).toBe(1);
    const got = target.data as Float32Array;
    expect([got[3 * 8192 - 1], got[3 * 8192], got[4 * 8192 - 1]]).toEqual([0, 8192, 2 * 8192 - 1]);
  });

  it('without a registered copy, go through TypedArray.set', () => {
    registerSharedCopy(undefined);
    const shared = new Uint8Array(new SharedArrayBuffer(NATIVE_COPY_MIN_BYTES)).fill(3);
    const plain = new Uint8Array(NATIVE_COPY_MIN_BYTES);
    copyInto(plain, shared);
    expect(plain.every((b) => b === 3)).toBe(true);
    registerLibcCopy();
  });

  const CASES = DTYPES.flatMap((dtype) =>
    REDUCE_OPS.filter((op) => isReduceOpDefined(op, dtype)).map((op) => [dtype, op] as const),
  );

  it.each(CASES)(
    'a SIMD reduction of shared %s arrays (%s) gives the same bits through libc as through set',
    (dtype, op) => {
      // Two and a half 64 KiB blocks: the native copy's blocks and a shorter last one.
      const length = Math.floor((2.5 * 65536) / arrayConstructor(dtype).BYTES_PER_ELEMENT) + 3;
      const inputs = [1, 2, 3].map((seed) => sharedRandomArray(dtype, length, seed * 31 + dtype.length));
      const reduce = () => {
        const out = sharedRandomArray(dtype, length, 0);
        reduceArrays(op, dtype, out, inputs);
        return bytesOf(out);
      };
      expect(inputs[0].buffer).toBeInstanceOf(SharedArrayBuffer);
      registerSharedCopy(undefined);
      const throughSet = reduce();
      registerLibcCopy();
      expect(Buffer.compare(reduce(), throughSet)).toBe(0);
    },
  );
});

describe('copyBytes', () => {
  // Up to 64 bytes go through its loop, the rest through copyInto; a whole source, and offsets on both sides.
  it.each([0, 1, 4, 63, 64, 65, 1000, NATIVE_COPY_MIN_BYTES + 8])('copies %i bytes', (length) => {
    const source = new Uint8Array(new SharedArrayBuffer(length + 16));
    const random = mulberry32(length);
    for (let i = 0; i < source.length; i++) source[i] = Math.floor(random() * 256);
    const cases: Array<[Uint8Array, number, number]> = [
      [source.subarray(0, length), 0, 0],
      [source, 16, 3],
    ];
    for (const [from, sourceOffset, targetOffset] of cases) {
      const target = new Uint8Array(new SharedArrayBuffer(length + 32)).fill(0xee);
      copyBytes(target, targetOffset, from, sourceOffset, length);
      const expected = Array.from(from.subarray(sourceOffset, sourceOffset + length));
      expect(Array.from(target.subarray(targetOffset, targetOffset + length))).toEqual(expected);
      // Nothing around the copied range is touched.
      expect(target.subarray(0, targetOffset).every((b) => b === 0xee)).toBe(true);
      expect(target.subarray(targetOffset + length).every((b) => b === 0xee)).toBe(true);
    }
  });
});
