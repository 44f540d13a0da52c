/**
 * float16 / bfloat16 <-> float32 conversion on raw 16-bit words, rounding to
 * nearest even. Decoding float16 goes through a 64 Ki-entry table because it
 * sits in the inner loop of every half-precision reduction. A scalar float16
 * conversion goes through the runtime's Float16Array where it has one.
 */
import { RuntimeFloat16Array } from './float16-array.ts';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const halfCell = RuntimeFloat16Array === undefined ? undefined : new RuntimeFloat16Array(1);
const halfCellWord = halfCell === undefined ? undefined : new Uint16Array(halfCell.buffer);

/**
 * float32 bits of `value`, rounded to odd when the conversion is inexact.
 * JavaScript numbers are float64, and rounding them to float32 before
 * rounding to 16 bits can manufacture a tie (1 + 2^-11 + 2^-40 becomes
 * 1 + 2^-11, which then goes to 1.0 in float16 instead of up). An odd last
 * bit marks "inexact" so the second rounding is correct; float32 inputs are
 * exact and unaffected.
 */
function float32BitsRoundedToOdd(value: number): number {
  f32[0] = value;
  const x = u32[0];
  if ((x & 1) === 1 || f32[0] === value || Number.isNaN(value)) return x;
  // Bits order magnitudes within one sign, so +-1 steps to the neighbour on the far side of `value`.
  return Math.abs(f32[0]) < Math.abs(value) ? x + 1 : x - 1;
}

/** The float16 word nearest `value` (ties to even; NaN to a NaN word). */
export function float32ToFloat16Bits(value: number): number {
  if (halfCell === undefined || halfCellWord === undefined) return roundToFloat16Bits(value);
  halfCell[0] = value;
  return halfCellWord[0];
}

/** float32ToFloat16Bits in portable code: the runtime's Float16Array rounds the same (test/float16-array.test.ts). */
export function roundToFloat16Bits(value: number): number {
  return float32BitsToFloat16Bits(float32BitsRoundedToOdd(value));
}

/**
 * The float16 word nearest the float32 whose bits are `x` (a uint32). Taking
 * bits rather than a number lets a loop over a Uint32Array view of float32
 * results skip the Float32Array round trip that numbers need.
 */
export function float32BitsToFloat16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 -> 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let r = mant >>> shift;
    if (rest > half || (rest === half && (r & 1) === 1)) r++;
    return sign | r;
  }
  let r = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  if (rest > 0x1000 || (rest === 0x1000 && (r & 1) === 1)) r++;
  return sign | r;
}

function decodeFloat16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant !== 0 ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

let float16Decoded: Float32Array | undefined;

/**
 * Every float16 word's value, built on first use: every rank thread loads
 * this module, few decode float16, and 65,536 calls at load would lengthen
 * every thread's start, all the more where threads outnumber the cores.
 */
export function float16Table(): Float32Array {
  if (float16Decoded === undefined) {
    float16Decoded = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) float16Decoded[h] = decodeFloat16(h);
  }
  return float16Decoded;
}

export function float16BitsToFloat32(bits: number): number {
  // The runtime's decoding spares a thread that decodes a few words the table's 65,536 entries.
  if (halfCell === undefined || halfCellWord === undefined) return float16Table()[bits & 0xffff];
  halfCellWord[0] = bits;
  return halfCell[0];
}

export function float32ToBfloat16Bits(value: number): number {
  return float32BitsToBfloat16Bits(float32BitsRoundedToOdd(value));
}

/** The bfloat16 word nearest the float32 whose bits are `x` (a uint32); see float32BitsToFloat16Bits. */
export function float32BitsToBfloat16Bits(x: number): number {
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bfloat16BitsToFloat32(bits: number): number {
  u32[0] = (bits & 0xffff) << 16;
  return f32[0];
}

// Whole arrays of float32 bit patterns, through Uint32Array views of float32 storage: reading or writing a
// Float32Array element converts to or from a double, and the rounding would only turn it back into bits.
// Imported bindings are read into locals before each loop: tsx and vitest compile imports to getter
// calls, which inside the loop cost more than the conversion itself.

let float16Bits: Uint32Array | undefined;

function widenFloat16(dst: Uint32Array, src: Uint16Array): void {
  float16Bits ??= new Uint32Array(float16Table().buffer);
  const table = float16Bits;
  for (let i = 0; i < src.length; i++) dst[i] = table[src[i]];
}

function widenBfloat16(dst: Uint32Array, src: Uint16Array): void {
  // bfloat16 is the top half of a float32.
  for (let i = 0; i < src.length; i++) dst[i] = src[i] << 16;
}

function narrowToFloat16(dst: Uint16Array, src: Uint32Array): void {
  const round = float32BitsToFloat16Bits;
  for (let i = 0; i < dst.length; i++) dst[i] = round(src[i]);
}

function narrowToBfloat16(dst: Uint16Array, src: Uint32Array): void {
  const round = float32BitsToBfloat16Bits;
  for (let i = 0; i < dst.length; i++) dst[i] = round(src[i]);
}

/** Writes the float32 bits of each of `src`'s words into `dst`, as many as `src` has. */
export function widenHalfWords(dtype: 'float16' | 'bfloat16'): (dst: Uint32Array, src: Uint16Array) => void {
  return dtype === 'float16' ? widenFloat16 : widenBfloat16;
}

/** Writes into each of `dst`'s words the nearest to the float32 whose bits `src` holds there (ties to even). */
export function narrowToHalfWords(
  dtype: 'float16' | 'bfloat16',
): (dst: Uint16Array, src: Uint32Array) => void {
  return dtype === 'float16' ? narrowToFloat16 : narrowToBfloat16;
}
