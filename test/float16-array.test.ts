/**
 * Where the runtime has a Float16Array (Node 24 and later), scalar float16
 * conversions and copies between float16 and other dtypes go through it. Each
 * case here is checked against the portable code (half.ts' rounding and its
 * decoding table), which Node 20 and 22 run, so both paths give the same words.
 */
import { describe, expect, it } from 'vitest';
import { type DType, Tensor } from '../src/index.ts';
import { RuntimeFloat16Array } from '../src/tensor/float16-array.ts';
import {
  float16BitsToFloat32,
  float16Table,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  roundToFloat16Bits,
} from '../src/tensor/half.ts';

/** Doubles where rounding to float16 is hard: every float16 value, each midpoint, and each nudged by a hair. */
function hardDoubles(): number[] {
  const table = float16Table();
  const values: number[] = [];
  for (let h = 0; h < 0x7c00; h++) {
    const [low, high] = [table[h], h === 0x7bff ? 65536 : table[h + 1]];
    const middle = (low + high) / 2;
    for (const v of [low, middle, middle * (1 + 2 ** -40), middle * (1 - 2 ** -40), middle + 2 ** -60]) {
      values.push(v, -v);
    }
  }
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  for (let i = 0; i < 20_000; i++) values.push((random() - 0.5) * 2 ** Math.floor(random() * 60 - 30));
  values.push(1e300, -1e300, 5e-324, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -0);
  return values;
}

/** What a typed array of `dtype` holds after storing `value` the way copy_ converts (convert.ts). */
function stored(value: number, dtype: DType): number | bigint {
  switch (dtype) {
    case 'float16':
      return roundToFloat16Bits(value);
    case 'bfloat16':
      return float32ToBfloat16Bits(value);
    case 'int64':
      return Number.isFinite(value) ? BigInt.asIntN(64, BigInt(Math.trunc(value))) : 0n;
    case 'bool':
      return value !== 0 ? 1 : 0;
    default: {
      const cell = Tensor.zeros([1], dtype).data as Float64Array;
      cell[0] = value;
      return cell[0];
    }
  }
}

/** The first few places where `got` differs from `want`, as [index, got, want]: a short failure for 65,536 elements. */
function mismatches(got: ArrayLike<number | bigint>, want: ArrayLike<number | bigint>): unknown[] {
  const wrong: unknown[] = [];
  for (let i = 0; i < Math.max(got.length, want.length) && wrong.length < 5; i++) {
    if (!Object.is(got[i], want[i])) wrong.push([i, got[i], want[i]]);
  }
  return wrong;
}

const isBfloat16NaN = (word: number) => (word & 0x7f80) === 0x7f80 && (word & 0x7f) !== 0;

const OTHER_DTYPES: DType[] = [
  'float64',
  'float32',
  'bfloat16',
  'int64',
  'int32',
  'int16',
  'int8',
  'uint8',
  'bool',
];

describe.skipIf(RuntimeFloat16Array === undefined)("float16 through the runtime's Float16Array", () => {
  it('rounds every hard double to the word the portable code gives', () => {
    const wrong = hardDoubles().filter((v) => float32ToFloat16Bits(v) !== roundToFloat16Bits(v));
    expect(wrong.slice(0, 5)).toEqual([]);
    const nan = float32ToFloat16Bits(Number.NaN);
    expect((nan & 0x7c00) === 0x7c00 && (nan & 0x3ff) !== 0).toBe(true);
  });

  it('decodes every word to the value of the table', () => {
    const table = float16Table();
    const wrong: number[] = [];
    for (let h = 0; h < 65536; h++) if (!Object.is(float16BitsToFloat32(h), table[h])) wrong.push(h);
    expect(wrong.slice(0, 5)).toEqual([]);
  });

  it('copies into float16 from every dtype as element-by-element rounding does, strided too', () => {
    const values = hardDoubles().slice(0, 30_000);
    for (const dtype of OTHER_DTYPES) {
      const src = Tensor.fromArray(values.map((v) => stored(v, dtype)) as number[], [100, 300], dtype);
      const expected = src.toArray().map((v) => roundToFloat16Bits(v));
      const dst = Tensor.zeros([100, 300], 'float16').copy_(src);
      expect(mismatches(dst.data as Uint16Array, expected), dtype).toEqual([]);
      // A transposed source goes through the tiled element loop rather than whole runs.
      const transposed = Tensor.zeros([300, 100], 'float16').copy_(src.transpose(0, 1));
      expect(
        mismatches(transposed.transpose(0, 1).contiguous().data as Uint16Array, expected),
        dtype,
      ).toEqual([]);
    }
  });

  it('copies out of float16 into every dtype as the decoded values convert', () => {
    const words = Array.from({ length: 65536 }, (_, h) => h);
    const src = Tensor.fromArray(Uint16Array.from(words), [256, 256], 'float16');
    const table = float16Table();
    for (const dtype of OTHER_DTYPES) {
      const expected = words.map((h) => stored(table[h], dtype));
      const dst = Tensor.zeros([256, 256], dtype).copy_(src);
      // Which NaN a NaN becomes is the engine's to choose (the runtime's keeps sign and payload): a NaN it stays.
      const sameNaN = (v: number) => (dtype === 'bfloat16' && isBfloat16NaN(v) ? 0x7fc0 : v);
      expect(mismatches(Array.from(dst.data as Float64Array, sameNaN), expected), dtype).toEqual([]);
    }
  });

  it('reads a Float16Array as float16 values and gives them back', () => {
    const values = [1, -2.5, 65504, 2 ** -24, Number.NEGATIVE_INFINITY, 0.1];
    const input = new (RuntimeFloat16Array as Float32ArrayConstructor)(values);
    const t = Tensor.fromArray(input);
    expect(t.dtype).toBe('float16');
    expect([...(t.data as Uint16Array)]).toEqual(values.map(roundToFloat16Bits));
    expect(t.toArray()).toEqual([...input]);
    expect(Tensor.fromArray(input, undefined, 'float32').toArray()).toEqual([...input]);
  });

  it('keeps a NaN payload in a copy within float16', () => {
    const src = Tensor.fromArray(Uint16Array.from([0x7d01, 0xfe3f, 0x3c00]), undefined, 'float16');
    expect([...(Tensor.zeros([3], 'float16').copy_(src).data as Uint16Array)]).toEqual([
      0x7d01, 0xfe3f, 0x3c00,
    ]);
    expect([...(src.clone().data as Uint16Array)]).toEqual([0x7d01, 0xfe3f, 0x3c00]);
  });
});
