import { describe, expect, it } from 'vitest';
import {
  bfloat16BitsToFloat32,
  FLOAT16_TABLE,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
} from '../src/tensor/half.ts';

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
    expect(FLOAT16_TABLE.length).toBe(65536);
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
