/**
 * copy_ into and out of the half types, against the portable element-by-element
 * conversions (half.ts' rounding and decoding): a contiguous copy from or to
 * float32 converts whole blocks of bit patterns, float16 goes through the
 * runtime's Float16Array where there is one (Node 24 and later), and any other
 * copy element by element. Every path must give the same words.
 */
import { describe, expect, it } from 'vitest';
import { DTYPES, type DType, Tensor } from '../src/index.ts';
import { RuntimeFloat16Array } from '../src/tensor/float16-array.ts';
import {
  bfloat16BitsToFloat32,
  float16BitsToFloat32,
  float16Table,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  roundToFloat16Bits,
} from '../src/tensor/half.ts';

/** Doubles where rounding is hard: every float16 value, each midpoint, each nudged by a hair; bfloat16's ties. */
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
  // bfloat16's ties and their neighbours: float32s whose low 16 bits are 0x8000, one less, one more.
  const bits = new Uint32Array(1);
  const float = new Float32Array(bits.buffer);
  for (let i = 0; i < 5_000; i++) {
    for (const low of [0x7fff, 0x8000, 0x8001]) {
      bits[0] = ((random() * 2 ** 32) & 0xffff0000) | low;
      if (!Number.isNaN(float[0])) values.push(float[0]);
    }
  }
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

type Half = 'float16' | 'bfloat16';
const ROUND: Record<Half, (value: number) => number> = {
  float16: roundToFloat16Bits,
  bfloat16: float32ToBfloat16Bits,
};
const DECODE: Record<Half, (word: number) => number> = {
  float16: (word) => float16Table()[word],
  bfloat16: bfloat16BitsToFloat32,
};
const isHalfNaN = (dtype: DType, word: number) =>
  dtype === 'float16'
    ? (word & 0x7c00) === 0x7c00 && (word & 0x3ff) !== 0
    : dtype === 'bfloat16' && (word & 0x7f80) === 0x7f80 && (word & 0x7f) !== 0;

describe.each(['float16', 'bfloat16'] as const)('copy_ and %s', (half) => {
  const others = DTYPES.filter((dtype) => dtype !== half);

  it('into it from every dtype, whole and transposed, gives what rounding each element gives', () => {
    const values = hardDoubles().slice(0, 45_000);
    for (const dtype of others) {
      const src = Tensor.fromArray(values.map((v) => stored(v, dtype)) as number[], [150, 300], dtype);
      const expected = src.toArray().map(ROUND[half]);
      const dst = Tensor.zeros([150, 300], half).copy_(src);
      expect(mismatches(dst.data as Uint16Array, expected), dtype).toEqual([]);
      // A transposed source goes through the tiled element loop rather than whole runs.
      const transposed = Tensor.zeros([300, 150], half).copy_(src.transpose(0, 1));
      expect(
        mismatches(transposed.transpose(0, 1).contiguous().data as Uint16Array, expected),
        dtype,
      ).toEqual([]);
    }
  });

  it('out of it into every dtype, whole and transposed, gives what each decoded value converts to', () => {
    const words = Array.from({ length: 65536 }, (_, h) => h);
    const src = Tensor.fromArray(Uint16Array.from(words), [256, 256], half);
    for (const dtype of others) {
      const expected = words.map((h) => stored(DECODE[half](h), dtype));
      // Which NaN a NaN becomes is the engine's to choose (the runtime's keeps sign and payload): a NaN it stays.
      const sameNaN = (v: number) => (isHalfNaN(dtype, v) ? 0x7e00 : v);
      const canonical = expected.map((v) => sameNaN(v as number));
      const dst = Tensor.zeros([256, 256], dtype).copy_(src);
      expect(mismatches(Array.from(dst.data as Float64Array, sameNaN), canonical), dtype).toEqual([]);
      const transposed = Tensor.zeros([256, 256], dtype)
        .copy_(src.transpose(0, 1))
        .transpose(0, 1)
        .contiguous();
      expect(mismatches(Array.from(transposed.data as Float64Array, sameNaN), canonical), dtype).toEqual([]);
    }
  });

  it('within it keeps every word, NaN payloads included', () => {
    const src = Tensor.fromArray(Uint16Array.from([0x7d01, 0xfe3f, 0x7f81, 0x3c00]), undefined, half);
    const words = [...(src.data as Uint16Array)];
    expect([...(Tensor.zeros([4], half).copy_(src).data as Uint16Array)]).toEqual(words);
    expect([...(src.clone().data as Uint16Array)]).toEqual(words);
  });
});

describe.skipIf(RuntimeFloat16Array === undefined)("float16 through the runtime's Float16Array", () => {
  it('rounds every hard double to the word the portable code gives', () => {
    const wrong = hardDoubles().filter((v) => float32ToFloat16Bits(v) !== roundToFloat16Bits(v));
    expect(wrong.slice(0, 5)).toEqual([]);
    expect(isHalfNaN('float16', float32ToFloat16Bits(Number.NaN))).toBe(true);
  });

  it('decodes every word to the value of the table', () => {
    const table = float16Table();
    const wrong: number[] = [];
    for (let h = 0; h < 65536; h++) if (!Object.is(float16BitsToFloat32(h), table[h])) wrong.push(h);
    expect(wrong.slice(0, 5)).toEqual([]);
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
});
