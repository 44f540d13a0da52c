import { describe, expect, it } from 'vitest';
import {
  bfloat16BitsToFloat32,
  float16BitsToFloat32,
  float16Table,
  float32BitsToBfloat16Bits,
  float32BitsToFloat16Bits,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
} from '../src/tensor/half.ts';
import { instantiateKernels } from '../src/tensor/simd-kernels.ts';

/** The float32 whose bit pattern is `bits`. */
function f32FromBits(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0];
}

const isFloat16NaN = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
const isBfloat16NaN = (h: number) => (h & 0x7f80) === 0x7f80 && (h & 0x7f) !== 0;

describe('float16 encoding', () => {
  it.each([
    [1, 0x3c00],
    [-2, 0xc000],
    [0.1, 0x2e66],
    [65504, 0x7bff],
    [65519.99, 0x7bff],
    [65520, 0x7c00],
    [1e6, 0x7c00],
    [2 ** -14, 0x0400],
    [2 ** -24, 0x0001],
    [2 ** -25, 0x0000],
    [1.5 * 2 ** -25, 0x0001],
    [3 * 2 ** -25, 0x0002],
    [1023.5 * 2 ** -24, 0x0400],
    [1e-8, 0x0000],
    [-1e-8, 0x8000],
    [1 + 2 ** -11, 0x3c00],
    [1 + 3 * 2 ** -11, 0x3c02],
    [1 + 2 ** -11 + 2 ** -40, 0x3c01],
    [1 + 2 ** -11 - 2 ** -40, 0x3c00],
    [0, 0x0000],
    [-0, 0x8000],
    [Number.POSITIVE_INFINITY, 0x7c00],
    [Number.NEGATIVE_INFINITY, 0xfc00],
  ])('encodes %d as word %i', (value, bits) => {
    expect(float32ToFloat16Bits(value)).toBe(bits);
  });

  it('keeps NaN a NaN', () => {
    expect(isFloat16NaN(float32ToFloat16Bits(Number.NaN))).toBe(true);
    expect(isFloat16NaN(float32ToFloat16Bits(f32FromBits(0x7f800001)))).toBe(true);
    expect(isFloat16NaN(float32ToFloat16Bits(f32FromBits(0xffc00000)))).toBe(true);
  });

  it('decodes known words', () => {
    expect(float16BitsToFloat32(0x3c00)).toBe(1);
    expect(float16BitsToFloat32(0x7bff)).toBe(65504);
    expect(float16BitsToFloat32(0x0001)).toBe(2 ** -24);
    expect(float16BitsToFloat32(0x3555)).toBe(0.333251953125);
    expect(Object.is(float16BitsToFloat32(0x8000), -0)).toBe(true);
    expect(float16BitsToFloat32(0x7c00)).toBe(Number.POSITIVE_INFINITY);
    expect(float16BitsToFloat32(0xfc00)).toBe(Number.NEGATIVE_INFINITY);
    expect(float16BitsToFloat32(0x7e00)).toBeNaN();
  });

  it('round-trips every 16-bit word except NaN payloads', () => {
    expect(float16Table().length).toBe(65536);
    let nans = 0;
    for (let h = 0; h < 65536; h++) {
      const value = float16BitsToFloat32(h);
      if (isFloat16NaN(h)) {
        expect(value).toBeNaN();
        expect(isFloat16NaN(float32ToFloat16Bits(value))).toBe(true);
        nans++;
      } else if (float32ToFloat16Bits(value) !== h) {
        throw new Error(
          `0x${h.toString(16)} decodes to ${value} which encodes to 0x${float32ToFloat16Bits(value).toString(16)}`,
        );
      }
    }
    expect(nans).toBe(2 * 1023);
  });
});

describe('bfloat16 encoding', () => {
  it.each([
    [1, 0x3f80],
    [-2, 0xc000],
    [3.140625, 0x4049],
    [f32FromBits(0x3f808000), 0x3f80],
    [f32FromBits(0x3f818000), 0x3f82],
    [f32FromBits(0x3f808001), 0x3f81],
    [f32FromBits(0x3f807fff), 0x3f80],
    [1 + 2 ** -8 + 2 ** -40, 0x3f81],
    [f32FromBits(0x7f7fffff), 0x7f80],
    [Number.POSITIVE_INFINITY, 0x7f80],
    [Number.NEGATIVE_INFINITY, 0xff80],
    [-0, 0x8000],
  ])('encodes %d as word %i', (value, bits) => {
    expect(float32ToBfloat16Bits(value)).toBe(bits);
  });

  it('quiets NaN', () => {
    expect(float32ToBfloat16Bits(Number.NaN)).toBe(0x7fc0);
    // A signalling NaN whose payload lives only in the low bits must not become infinity.
    expect(float32ToBfloat16Bits(f32FromBits(0x7f800001))).toBe(0x7fc0);
    expect(isBfloat16NaN(float32ToBfloat16Bits(f32FromBits(0xff812345)))).toBe(true);
  });

  it('decodes and round-trips every word except NaN payloads', () => {
    expect(bfloat16BitsToFloat32(0x3f80)).toBe(1);
    expect(bfloat16BitsToFloat32(0x4049)).toBe(3.140625);
    expect(bfloat16BitsToFloat32(0x7fc0)).toBeNaN();
    for (let h = 0; h < 65536; h++) {
      const value = bfloat16BitsToFloat32(h);
      const back = float32ToBfloat16Bits(value);
      if (isBfloat16NaN(h) ? !isBfloat16NaN(back) : back !== h) {
        throw new Error(`0x${h.toString(16)} decodes to ${value} which encodes to 0x${back.toString(16)}`);
      }
    }
  });
});

/** float32 bit patterns where rounding to 16 bits changes behaviour, each also with the sign bit set. */
const EDGE_BITS = [
  0x00000000, // zero
  0x00000001, // smallest float32 subnormal
  0x007fffff, // largest float32 subnormal
  0x00800000, // smallest float32 normal
  0x33000000, // 2^-25: half the smallest float16 subnormal, a tie that goes to zero
  0x33000001, // just above it: rounds up to the smallest subnormal
  0x33c00000, // 1.5 * 2^-24: a subnormal tie that goes up to even
  0x387fc000, // largest float16 subnormal
  0x387fe000, // tie between it and the smallest float16 normal
  0x38800000, // 2^-14: smallest float16 normal
  0x3f800000, // 1
  0x3f801000, // 1 + 2^-11: float16 tie, to even (down)
  0x3f803000, // 1 + 3 * 2^-11: float16 tie, to even (up)
  0x3f801001, // just past a float16 tie
  0x3f808000, // 1 + 2^-8: bfloat16 tie, to even (down)
  0x3f818000, // bfloat16 tie, to even (up)
  0x3f807fff, // just under a bfloat16 tie
  0x477fe000, // 65504: largest float16
  0x477fefff, // just under the float16 overflow threshold
  0x477ff000, // 65520: rounds to float16 inf
  0x47800000, // 65536
  0x7f7fffff, // largest float32: bfloat16 rounds it to inf
  0x7f800000, // inf
  0x7f800001, // signalling NaN with payload only in the low bits
  0x7f802000, // NaN with a payload bit float16 keeps
  0x7fc00000, // quiet NaN
  0x7fffffff,
].flatMap((bits) => [bits, (bits | 0x80000000) >>> 0]);

/** xorshift32: deterministic uint32 patterns, so a failure reproduces. */
function randomBits(count: number, seed = 0x9e3779b9): Uint32Array {
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    out[i] = seed;
  }
  return out;
}

const SAMPLE = new Uint32Array([...EDGE_BITS, ...randomBits(1 << 20)]);

const isFloat32NaN = (bits: number) => (bits & 0x7fffffff) > 0x7f800000;

/** The first bit pattern in SAMPLE where `got` differs from `expected`, or 'none'. */
function firstMismatch(got: (bits: number) => number, expected: (bits: number) => number): string {
  const bits = SAMPLE.find((x) => got(x) !== expected(x));
  return bits === undefined
    ? 'none'
    : `0x${bits.toString(16)}: 0x${got(bits).toString(16)}, expected 0x${expected(bits).toString(16)}`;
}

describe('encoding float32 bits', () => {
  // The number entry points read NaN through a double, which may not keep its payload; for NaN only
  // NaN-ness is compared. Everything else must match bit for bit.
  it('float32BitsToFloat16Bits agrees with float32ToFloat16Bits', () => {
    const viaNumber = (bits: number) => {
      const h = float32ToFloat16Bits(f32FromBits(bits));
      return isFloat32NaN(bits) && isFloat16NaN(h) ? float32BitsToFloat16Bits(bits) : h;
    };
    expect(firstMismatch(float32BitsToFloat16Bits, viaNumber)).toBe('none');
  });

  it('float32BitsToBfloat16Bits agrees with float32ToBfloat16Bits', () => {
    const viaNumber = (bits: number) => {
      const h = float32ToBfloat16Bits(f32FromBits(bits));
      return isFloat32NaN(bits) && isBfloat16NaN(h) ? float32BitsToBfloat16Bits(bits) : h;
    };
    expect(firstMismatch(float32BitsToBfloat16Bits, viaNumber)).toBe('none');
  });

  it('keeps NaN payloads where they fit and quiets them', () => {
    expect(float32BitsToFloat16Bits(0x7f802000)).toBe(0x7e01);
    expect(float32BitsToFloat16Bits(0xff800001)).toBe(0xfe00);
    expect(float32BitsToBfloat16Bits(0x7f800001)).toBe(0x7fc0);
    expect(float32BitsToBfloat16Bits(0xff810000)).toBe(0xffc1);
  });
});

describe('the wasm half conversions', () => {
  const exports = instantiateKernels(3);
  // A runtime without WebAssembly SIMD never runs them.
  const run = it.runIf(exports !== null);
  const kernel = (name: string) => exports![name] as (dst: number, src: number, bytes: number) => void;
  const memory = () => (exports!.memory as { buffer: ArrayBuffer }).buffer;
  const BLOCK = 16384;
  const [FLOATS, WORDS] = [0, 4 * BLOCK];

  /** Runs a narrow kernel over `bits`, a block at a time, returning the words it wrote. */
  function narrow(name: string, bits: Uint32Array): Uint16Array {
    const floats = new Uint32Array(memory(), FLOATS, BLOCK);
    const words = new Uint16Array(memory(), WORDS, BLOCK);
    const out = new Uint16Array(bits.length);
    for (let start = 0; start < bits.length; start += BLOCK) {
      const block = bits.subarray(start, start + BLOCK);
      floats.set(block);
      kernel(name)(WORDS, FLOATS, 4 * block.length);
      out.set(words.subarray(0, block.length), start);
    }
    return out;
  }

  run('narrow_f16 is float32BitsToFloat16Bits, NaN payloads included', () => {
    const words = narrow('narrow_f16', SAMPLE);
    const i = SAMPLE.findIndex((bits, k) => words[k] !== float32BitsToFloat16Bits(bits));
    expect(i < 0 ? 'none' : `0x${SAMPLE[i].toString(16)} -> 0x${words[i].toString(16)}`).toBe('none');
  });

  run('narrow_bf16 is float32BitsToBfloat16Bits, NaN payloads included', () => {
    const words = narrow('narrow_bf16', SAMPLE);
    const i = SAMPLE.findIndex((bits, k) => words[k] !== float32BitsToBfloat16Bits(bits));
    expect(i < 0 ? 'none' : `0x${SAMPLE[i].toString(16)} -> 0x${words[i].toString(16)}`).toBe('none');
  });

  run('widen_f16 and widen_bf16 decode every word exactly', () => {
    const words = new Uint16Array(memory(), WORDS, BLOCK);
    const floats = new Uint32Array(memory(), FLOATS, BLOCK);
    const table = new Uint32Array(float16Table().buffer);
    for (let base = 0; base < 65536; base += BLOCK) {
      words.forEach((_, i) => {
        words[i] = base + i;
      });
      kernel('widen_f16')(FLOATS, WORDS, 2 * BLOCK);
      // The table holds the canonical NaN; wasm keeps the sign and payload, as a float32 NaN.
      const f16 = floats.findIndex((bits, i) =>
        isFloat16NaN(base + i)
          ? !isFloat32NaN(bits) || bits >>> 31 !== (base + i) >>> 15
          : bits !== table[base + i],
      );
      expect(f16 < 0 ? 'none' : `float16 0x${(base + f16).toString(16)}`).toBe('none');
      kernel('widen_bf16')(FLOATS, WORDS, 2 * BLOCK);
      const bf16 = floats.findIndex((bits, i) => bits !== ((base + i) << 16) >>> 0);
      expect(bf16 < 0 ? 'none' : `bfloat16 0x${(base + bf16).toString(16)}`).toBe('none');
    }
  });
});
