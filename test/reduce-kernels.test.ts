import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  arrayConstructor,
  DTYPES,
  type DType,
  isFloatingDType,
  itemSize,
  type TypedArray,
} from '../src/tensor/dtype.ts';
import { float32ToBfloat16Bits, float32ToFloat16Bits } from '../src/tensor/half.ts';
import {
  assertReduceOp,
  isReduceOpDefined,
  REDUCE_OPS,
  type ReduceOp,
  reduceArrays,
  setSimdKernels,
} from '../src/tensor/reduce-kernels.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';

// Both sides of SIMD_MIN's 64 elements, and odd lengths that end mid-block for the 4096-element
// half blocks and the 16384-element blocks.
const LENGTHS = [1, 7, 64, 65, 16384 + 4099];
const INPUT_COUNTS = [1, 2, 3, 5];

function opsFor(dtype: DType): ReduceOp[] {
  return REDUCE_OPS.filter((op) => isReduceOpDefined(op, dtype));
}

const CASES = DTYPES.flatMap((dtype) => opsFor(dtype).map((op) => [dtype, op] as const));

const INT_BITS: Partial<Record<DType, number>> = { int64: 64, int32: 32, int16: 16, int8: 8 };

/** Wraps an exact integer to the dtype, like a C cast. */
function wrap(dtype: DType, value: bigint): bigint {
  return dtype === 'uint8' ? BigInt.asUintN(8, value) : BigInt.asIntN(INT_BITS[dtype]!, value);
}

function pick<T>(random: () => number, choices: readonly T[]): T {
  return choices[Math.floor(random() * choices.length)];
}

// Specials appear at about 1 in 16 elements so most elements still exercise plain arithmetic.
function randomFloat(random: () => number, specials: readonly number[]): number {
  return random() < 1 / 16 ? pick(random, specials) : (random() - 0.5) * 200;
}

function randomArray(dtype: DType, length: number, random: () => number): TypedArray {
  const out = new (arrayConstructor(dtype))(length);
  for (let i = 0; i < length; i++) {
    switch (dtype) {
      case 'float64':
      case 'float32':
        out[i] = randomFloat(random, [Number.NaN, Number.POSITIVE_INFINITY, -0, 1e30, -1e-30, 1e8, 1]);
        break;
      case 'float16':
        // 60000 overflows when two are added; 1 + 2^-11 + 2^-11 rounds differently per step than once.
        out[i] = float32ToFloat16Bits(
          randomFloat(random, [Number.NaN, Number.NEGATIVE_INFINITY, 60000, 1, 2 ** -11]),
        );
        break;
      case 'bfloat16':
        out[i] = float32ToBfloat16Bits(
          randomFloat(random, [Number.NaN, Number.POSITIVE_INFINITY, 3e38, 1, 2 ** -8]),
        );
        break;
      case 'bool':
        out[i] = random() < 0.5 ? 1 : 0;
        break;
      case 'int64':
        (out as BigInt64Array)[i] = BigInt.asIntN(
          64,
          random() < 1 / 16
            ? pick(random, [-(2n ** 63n), 2n ** 63n - 1n, -1n, 0n])
            : (BigInt(Math.floor(random() * 2 ** 32)) << 32n) | BigInt(Math.floor(random() * 2 ** 32)),
        );
        break;
      default: {
        // Full range: sums and products of several wrap almost every time.
        const bits = dtype === 'uint8' ? 8 : INT_BITS[dtype]!;
        // The typed array stores it wrapped to the dtype, as wrap() would.
        out[i] = Math.floor(random() * 2 ** bits);
      }
    }
  }
  return out;
}

function decodeFloat16(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return exp === 0 ? sign * mant * 2 ** -24 : sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

const BFLOAT16_WORD = new Uint32Array(1);
const BFLOAT16_AS_FLOAT = new Float32Array(BFLOAT16_WORD.buffer);

function decodeBfloat16(bits: number): number {
  BFLOAT16_WORD[0] = bits << 16;
  return BFLOAT16_AS_FLOAT[0];
}

// The reference's folds, made once rather than per element (the reference runs over millions of elements).
const INTEGER_FOLD: Record<ReduceOp, (a: bigint, b: bigint) => bigint> = {
  sum: (a, b) => a + b,
  avg: (a, b) => a + b,
  prod: (a, b) => a * b,
  // biome-ignore lint/complexity/useMathMinMax: Math.min does not take bigint
  min: (a, b) => (a < b ? a : b),
  // biome-ignore lint/complexity/useMathMinMax: Math.max does not take bigint
  max: (a, b) => (a > b ? a : b),
  band: (a, b) => a & b,
  bor: (a, b) => a | b,
  bxor: (a, b) => a ^ b,
};
const FLOAT_FOLD: Record<string, (a: number, b: number) => number> = {
  sum: (a, b) => a + b,
  avg: (a, b) => a + b,
  prod: (a, b) => a * b,
  min: Math.min,
  max: Math.max,
};
const HALF_DECODE: Record<string, (bits: number) => number> = {
  float16: decodeFloat16,
  bfloat16: decodeBfloat16,
};
const asIs = (v: number) => v;

/** One output element, computed the obvious way: exact BigInt for integers, one rounding per step for floats. */
function referenceElement(op: ReduceOp, dtype: DType, values: readonly (number | bigint)[]): number | bigint {
  const n = values.length;
  if (dtype === 'bool') {
    const truths = values.map((v) => v !== 0);
    if (op === 'bxor') return truths.filter(Boolean).length % 2;
    return (['prod', 'min', 'band'].includes(op) ? truths.every(Boolean) : truths.some(Boolean)) ? 1 : 0;
  }
  if (!isFloatingDType(dtype)) {
    const xs = values.map((v) => BigInt(v));
    let acc = wrap(dtype, xs.reduce(INTEGER_FOLD[op]));
    // The sum wraps first, then divides truncating toward zero (BigInt division truncates).
    if (op === 'avg') acc = wrap(dtype, acc / BigInt(n));
    return dtype === 'int64' ? acc : Number(acc);
  }
  const decode = HALF_DECODE[dtype] ?? asIs;
  const round = dtype === 'float64' ? asIs : Math.fround;
  const xs = values.map((v) => decode(v as number));
  const fold = FLOAT_FOLD[op];
  let acc = xs.slice(1).reduce((a, b) => round(fold(a, b)), xs[0]);
  if (op === 'avg') acc = round(acc / n);
  if (dtype === 'float16') return float32ToFloat16Bits(acc);
  return dtype === 'bfloat16' ? float32ToBfloat16Bits(acc) : acc;
}

function reference(op: ReduceOp, dtype: DType, inputs: readonly TypedArray[]): TypedArray {
  if (inputs.length === 1) return inputs[0].slice();
  const out = new (arrayConstructor(dtype))(inputs[0].length);
  for (let i = 0; i < out.length; i++)
    out[i] = referenceElement(
      op,
      dtype,
      inputs.map((x) => x[i]),
    ) as never;
  return out;
}

function sameValue(dtype: DType, x: number | bigint, y: number | bigint): boolean {
  if (Object.is(x, y)) return true;
  // Half NaNs may differ in payload; as floats they are the same value.
  const nanAbove = { float16: 0x7c00, bfloat16: 0x7f80 }[dtype as string];
  return nanAbove !== undefined && (Number(x) & 0x7fff) > nanAbove && (Number(y) & 0x7fff) > nanAbove;
}

/** A plain loop instead of toEqual, which takes seconds on arrays this long; names the first difference. */
function expectReduced(
  op: ReduceOp,
  dtype: DType,
  out: TypedArray,
  expected: TypedArray,
  what: string,
): void {
  const i = out.findIndex((v: number | bigint, k: number) => !sameValue(dtype, v, expected[k]));
  const got = i < 0 ? 'all equal' : `[${i}] = ${out[i]}, expected ${expected[i]}`;
  expect(got, `${op} ${dtype} ${what}`).toBe('all equal');
}

function bytesOf(x: TypedArray): Buffer {
  return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
}

/** Runs the suite's tests with reduceArrays on the SIMD kernels or on the JS loops only. */
function onPath(path: 'simd' | 'js'): void {
  beforeAll(() => {
    setSimdKernels(path === 'simd');
  });
  afterAll(() => {
    setSimdKernels(true);
  });
}

/**
 * The inputs and reference of a case below, made by whichever of its two paths ('simd', 'js') runs
 * it first and kept for the other, which would make the same from the same seed. Tests pass copies of
 * the inputs to reduceArrays, so what is kept stays as made.
 */
const madeForBothPaths = new Map<string, { value: unknown; uses: number }>();
function madeOnce<T>(key: string, make: () => T): T {
  let entry = madeForBothPaths.get(key);
  if (entry === undefined) {
    entry = { value: make(), uses: 0 };
    madeForBothPaths.set(key, entry);
  }
  if (++entry.uses === 2) madeForBothPaths.delete(key);
  return entry.value as T;
}

describe.each(['simd', 'js'] as const)('reduceArrays against a reference loop (%s)', (path) => {
  onPath(path);
  it.each(CASES)('%s %s', (dtype, op) => {
    const cases = madeOnce(`${dtype} ${op}`, () => {
      const random = mulberry32(dtype.length * 131 + op.length);
      return LENGTHS.flatMap((length) =>
        INPUT_COUNTS.map((count) => {
          const inputs = Array.from({ length: count }, () => randomArray(dtype, length, random));
          return { length, count, made: inputs, expected: reference(op, dtype, inputs) };
        }),
      );
    });
    for (const { length, count, made, expected } of cases) {
      const inputs = made.map((x) => x.slice());
      const out = new (arrayConstructor(dtype))(length);
      reduceArrays(op, dtype, out, inputs);
      expectReduced(op, dtype, out, expected, `${count} inputs of ${length}`);
      inputs.forEach((x, j) => {
        expect(bytesOf(x).equals(bytesOf(made[j])), `input ${j} left untouched`).toBe(true);
      });
    }
  });
});

describe.each(['simd', 'js'] as const)('reduceArrays in place (out is one of the inputs, %s)', (path) => {
  onPath(path);
  const length = 16384 * 2 + 5;
  for (const dtype of ['float32', 'float16', 'int64', 'int8', 'bool'] as const) {
    for (const op of ['sum', 'max', 'avg'] as const) {
      it.each([0, 1, 2, 4])(`${dtype} ${op}: out = inputs[%i] of 5`, (k) => {
        const { made, expected } = madeOnce(`in place ${dtype} ${op} ${k}`, () => {
          const random = mulberry32(k + 1);
          const inputs = Array.from({ length: 5 }, () => randomArray(dtype, length, random));
          return { made: inputs, expected: reference(op, dtype, inputs) };
        });
        const inputs = made.map((x) => x.slice());
        reduceArrays(op, dtype, inputs[k], inputs);
        expectReduced(op, dtype, inputs[k], expected, `in place at ${k}`);
      });
    }
  }

  it('folds left to right even when out is a later input (float32 rounding depends on order)', () => {
    const a = new Float32Array([1e8, 1]);
    const b = new Float32Array([1, 1e8]);
    const c = new Float32Array([-1e8, -1e8]);
    // (1e8 + 1) rounds back to 1e8 in float32; folding c first would give 1.
    reduceArrays('sum', 'float32', c, [a, b, c]);
    expect(Array.from(c)).toEqual([0, 0]);
  });

  it('handles out appearing several times among the inputs', () => {
    const random = mulberry32(7);
    const a = randomArray('float32', 20000, random);
    const b = randomArray('float32', 20000, random);
    const expected = reference('sum', 'float32', [a, b, a, a, b]);
    reduceArrays('sum', 'float32', a, [a, b, a, a, b]);
    expectReduced('sum', 'float32', a, expected, 'out at 0, 2 and 3');
  });

  it('accepts a subarray of a larger buffer as out and input', () => {
    const whole = new Int32Array([9, 1, 2, 3, 9]);
    const view = whole.subarray(1, 4);
    reduceArrays('sum', 'int32', view, [new Int32Array([10, 20, 30]), view]);
    expect(Array.from(whole)).toEqual([9, 11, 22, 33, 9]);
  });
});

/** Bit patterns the float kernels must agree on: NaN (with payloads), infinities, signed zeros, subnormals. */
const SPECIAL_WORDS: Partial<Record<DType, readonly number[]>> = {
  float16: [0x7e00, 0xfe01, 0x7c01, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0x3c00],
  bfloat16: [0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x7f7f, 0x3f80],
};
const SPECIAL_FLOATS = [
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  0,
  -0,
  1e-45, // float32 subnormal
  -5e-324, // float64 subnormal
  3.4e38,
  1,
];

/**
 * Arbitrary contents: for floats an eighth specials, three eighths random bit patterns (NaN payloads,
 * huge and tiny exponents) and half moderate values whose sums round; for integers random bits.
 */
function anyBits(dtype: DType, length: number, random: () => number): TypedArray {
  const out = new (arrayConstructor(dtype))(length);
  const bytes = new Uint8Array(out.buffer);
  for (let i = 0; i < bytes.length; i++)
    bytes[i] = dtype === 'bool' ? Number(random() < 0.5) : random() * 256;
  if (!isFloatingDType(dtype)) return out;
  const words = SPECIAL_WORDS[dtype];
  const encode =
    { float16: float32ToFloat16Bits, bfloat16: float32ToBfloat16Bits }[dtype as string] ?? ((v: number) => v);
  for (let i = 0; i < length; i++) {
    const r = random();
    if (r < 1 / 8) out[i] = words ? pick(random, words) : pick(random, SPECIAL_FLOATS);
    else if (r >= 1 / 2) out[i] = encode((random() - 0.5) * 200);
  }
  return out;
}

describe('the SIMD kernels and the JS loops give the same bits', () => {
  afterAll(() => {
    setSimdKernels(true);
  });

  it('runs on WebAssembly SIMD here (Node 20 on x64 and arm64 has it)', () => {
    expect(setSimdKernels(true)).toBe(true);
  });

  it.each(CASES)('%s %s', (dtype, op) => {
    const random = mulberry32(dtype.length * 7 + op.length);
    // Three and a half 64 KiB blocks, ending part-way through a vector.
    const length = Math.floor((3.5 * 65536) / itemSize(dtype)) + 3;
    for (const count of [2, 3]) {
      const inputs = Array.from({ length: count }, () => anyBits(dtype, length, random));
      const [js, simd] = [false, true].map((useSimd) => {
        setSimdKernels(useSimd);
        const out = new (arrayConstructor(dtype))(length);
        reduceArrays(op, dtype, out, inputs);
        return out;
      });
      // NaN payloads may differ (neither JS nor wasm fixes them); every other bit must match.
      expectReduced(op, dtype, simd, js, `${count} inputs, SIMD vs JS`);
    }
  });
});

describe('reduceArrays semantics spelled out', () => {
  it('wraps integer sums and products like C', () => {
    const i8 = new Int8Array(1);
    reduceArrays('sum', 'int8', i8, [new Int8Array([100]), new Int8Array([100])]);
    expect(i8[0]).toBe(-56);
    const i32 = new Int32Array(1);
    // (2^31 - 1)^2 = 2^62 - 2^32 + 1: a double product loses the final +1.
    reduceArrays('prod', 'int32', i32, [new Int32Array([2147483647]), new Int32Array([2147483647])]);
    expect(i32[0]).toBe(1);
    const i64 = new BigInt64Array(1);
    reduceArrays('sum', 'int64', i64, [new BigInt64Array([2n ** 63n - 1n]), new BigInt64Array([1n])]);
    expect(i64[0]).toBe(-(2n ** 63n));
  });

  it('truncates integer avg toward zero after the wrapped sum', () => {
    const out = new Int32Array(2);
    reduceArrays('avg', 'int32', out, [new Int32Array([-7, 7]), new Int32Array([0, 0])]);
    expect(Array.from(out)).toEqual([-3, 3]);
    const u8 = new Uint8Array(1);
    reduceArrays('avg', 'uint8', u8, [new Uint8Array([255]), new Uint8Array([255])]);
    expect(u8[0]).toBe(127);
    const i64 = new BigInt64Array(1);
    reduceArrays('avg', 'int64', i64, [
      new BigInt64Array([-7n]),
      new BigInt64Array([0n]),
      new BigInt64Array([0n]),
    ]);
    expect(i64[0]).toBe(-2n);
  });

  it('propagates NaN through min and max wherever it sits', () => {
    for (const op of ['min', 'max'] as const) {
      const out = new Float64Array(3);
      const nanFirst = new Float64Array([Number.NaN, 1, 1]);
      const nanLast = new Float64Array([1, 1, Number.NaN]);
      reduceArrays(op, 'float64', out, [nanFirst, new Float64Array([-5, Number.NaN, 5]), nanLast]);
      expect(Array.from(out)).toEqual([Number.NaN, Number.NaN, Number.NaN]);
    }
  });

  it('accumulates float16 and bfloat16 in float32 and rounds once', () => {
    const f16 = (v: number) => new Uint16Array([float32ToFloat16Bits(v)]);
    const out = new Uint16Array(1);
    // Rounding after each add would drop both 2^-11 halves (ties to even); once at the end keeps them.
    reduceArrays('sum', 'float16', out, [f16(1), f16(2 ** -11), f16(2 ** -11)]);
    expect(out[0]).toBe(0x3c01);
    const bf16 = (v: number) => new Uint16Array([float32ToBfloat16Bits(v)]);
    reduceArrays('sum', 'bfloat16', out, [bf16(1), bf16(2 ** -8), bf16(2 ** -8)]);
    expect(out[0]).toBe(0x3f81);
    // A single tie still rounds to even.
    reduceArrays('sum', 'float16', out, [f16(1), f16(2 ** -11)]);
    expect(out[0]).toBe(0x3c00);
  });

  it('reduces bool logically', () => {
    const a = new Uint8Array([0, 0, 1, 1]);
    const b = new Uint8Array([0, 1, 0, 1]);
    const result = (op: ReduceOp) => {
      const out = new Uint8Array(4);
      reduceArrays(op, 'bool', out, [a, b]);
      return Array.from(out);
    };
    expect(result('sum')).toEqual([0, 1, 1, 1]);
    expect(result('avg')).toEqual([0, 1, 1, 1]);
    expect(result('prod')).toEqual([0, 0, 0, 1]);
    expect(result('min')).toEqual([0, 0, 0, 1]);
    expect(result('bxor')).toEqual([0, 1, 1, 0]);
  });

  it('does nothing on empty arrays', () => {
    const out = new Float32Array(0);
    reduceArrays('sum', 'float32', out, [out, new Float32Array(0)]);
    expect(out.length).toBe(0);
  });
});

describe('reduce op validation', () => {
  it('lists the ops', () => {
    expect([...REDUCE_OPS]).toEqual(['sum', 'avg', 'prod', 'min', 'max', 'band', 'bor', 'bxor']);
  });

  it('returns a valid op', () => {
    expect(assertReduceOp('bxor', 'int16', 'allReduce')).toBe('bxor');
    expect(assertReduceOp('max', 'bfloat16', 'allReduce')).toBe('max');
  });

  it.each(['float64', 'float32', 'float16', 'bfloat16'] as const)('rejects bitwise ops on %s', (dtype) => {
    for (const op of ['band', 'bor', 'bxor']) {
      expect(() => assertReduceOp(op, dtype, 'allReduce')).toThrow(
        new TypeError(`allReduce: ${op} is defined for integer and bool tensors only, got ${dtype}`),
      );
    }
  });

  it.each(['mean', 'SUM', 42, undefined, 1n, Symbol('sum')])('rejects unknown op %s', (op) => {
    expect(() => assertReduceOp(op, 'float32', 'reduce')).toThrow(TypeError);
    expect(() => assertReduceOp(op, 'float32', 'reduce')).toThrow(
      /^reduce: unknown reduce op .* for float32/,
    );
  });
});

describe('reduceArrays argument errors', () => {
  const a = new Float32Array(4);

  it('rejects band on float32', () => {
    expect(() => reduceArrays('band', 'float32', a, [a, a])).toThrow(
      new TypeError('reduceArrays: band is defined for integer and bool tensors only, got float32'),
    );
  });

  it('rejects an unknown op', () => {
    expect(() => reduceArrays('mean' as ReduceOp, 'float32', a, [a])).toThrow(
      /reduceArrays: unknown reduce op "mean"/,
    );
  });

  it('rejects mismatched lengths', () => {
    expect(() => reduceArrays('sum', 'float32', a, [a, new Float32Array(3)])).toThrow(RangeError);
    expect(() => reduceArrays('sum', 'float32', new Float32Array(5), [a])).toThrow(RangeError);
  });

  it('rejects no inputs', () => {
    expect(() => reduceArrays('sum', 'float32', a, [])).toThrow(RangeError);
  });

  it('rejects arrays of the wrong class for the dtype', () => {
    expect(() => reduceArrays('sum', 'float64', a, [a])).toThrow(/out must be a Float64Array for float64/);
    expect(() => reduceArrays('sum', 'float32', a, [a, new Float64Array(4)])).toThrow(TypeError);
  });

  it('rejects out partly overlapping an input', () => {
    const whole = new Float32Array(8);
    const out = whole.subarray(0, 4);
    expect(() => reduceArrays('sum', 'float32', out, [a, whole.subarray(2, 6)])).toThrow(
      /partly overlaps inputs\[1]/,
    );
    expect(() => reduceArrays('sum', 'float32', out, [whole.subarray(4, 8), a])).not.toThrow();
  });
});
