/**
 * Conversions between JavaScript values and the raw words a dtype stores
 * (float16/bfloat16 as 16-bit patterns, int64 as BigInt, bool as 0/1).
 */
import type { DType } from './dtype.ts';
import { RuntimeFloat16Array } from './float16-array.ts';
import { bfloat16BitsToFloat32, float16Table, float32ToBfloat16Bits, float32ToFloat16Bits } from './half.ts';

/** What one element of a typed array holds. */
export type Raw = number | bigint;
export type Scalar = number | bigint | boolean;
type Cast = (raw: Raw) => Raw;

/** [min, max + 1) of each integer dtype: exact doubles, and exact in comparisons with a bigint too. */
const INT_BOUNDS: Partial<Record<DType, readonly [number, number]>> = {
  int64: [-(2 ** 63), 2 ** 63],
  int32: [-(2 ** 31), 2 ** 31],
  int16: [-(2 ** 15), 2 ** 15],
  int8: [-128, 128],
  uint8: [0, 256],
};

/**
 * Encodes a scalar for storage, or returns undefined when `dtype` cannot
 * represent it. Float dtypes round to nearest even (overflowing to +-inf, as
 * IEEE rounding does); integer dtypes truncate fractions toward zero but
 * refuse NaN, inf and out-of-range values, which would otherwise wrap silently.
 */
export function scalarToRaw(value: unknown, dtype: DType): Raw | undefined {
  if (typeof value === 'boolean') value = value ? 1 : 0;
  if (dtype === 'bool') {
    if (typeof value === 'number') return value !== 0 ? 1 : 0;
    return typeof value === 'bigint' ? Number(value !== 0n) : undefined;
  }
  const bounds = INT_BOUNDS[dtype];
  if (bounds !== undefined) {
    if (typeof value === 'number') value = Number.isFinite(value) ? Math.trunc(value) : undefined;
    if ((typeof value !== 'number' && typeof value !== 'bigint') || value < bounds[0] || value >= bounds[1]) {
      return undefined;
    }
    return dtype === 'int64' ? BigInt(value) : Number(value);
  }
  if (typeof value === 'bigint') value = Number(value);
  if (typeof value !== 'number') return undefined;
  return encodeFloat(dtype)(value);
}

/** scalarToRaw, throwing a TypeError (not a scalar) or RangeError (not representable) that names `what`. */
export function encodeScalar(value: unknown, dtype: DType, where: string, what: string): Raw {
  const raw = scalarToRaw(value, dtype);
  if (raw !== undefined) return raw;
  if (typeof value !== 'number' && typeof value !== 'bigint' && typeof value !== 'boolean') {
    throw new TypeError(
      `${where}: ${what} must be a number, bigint or boolean, got ${describeScalar(value)}`,
    );
  }
  throw new RangeError(`${where}: ${what} ${describeScalar(value)} is not representable as ${dtype}`);
}

function describeScalar(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}

/** Decodes a raw word to a JavaScript number (int64 may lose precision beyond 2^53; bool gives 0/1). */
export function rawToNumber(dtype: DType): (raw: Raw) => number {
  switch (dtype) {
    case 'float16': {
      const table = float16Table();
      return (raw) => table[raw as number];
    }
    case 'bfloat16':
      return (raw) => bfloat16BitsToFloat32(raw as number);
    case 'bool':
      return (raw) => (raw !== 0 ? 1 : 0);
    default:
      return Number;
  }
}

const keepNumber = (value: number): number => value;

function encodeFloat(dtype: DType): (value: number) => Raw {
  if (dtype === 'float16') return float32ToFloat16Bits;
  if (dtype === 'bfloat16') return float32ToBfloat16Bits;
  return keepNumber;
}

/**
 * The dtype a copy between dtypes reads or writes `dtype`'s elements as:
 * float16 through the runtime's Float16Array (see elementView) converts on
 * every load and store as float32 does, so copies treat it as float32.
 */
export function copiedAs(dtype: DType): DType {
  return dtype === 'float16' && RuntimeFloat16Array !== undefined ? 'float32' : dtype;
}

/**
 * Element conversion used by `copy_` between dtypes, or null when a plain
 * typed-array store (or `set`) already converts: the same dtype, or between
 * float64/float32/int32/int16/int8/uint8 (and from bool, stored as 0/1).
 * Unlike scalar writes this never throws mid-copy: it follows
 * typed-array store semantics (float to integer truncates toward zero and
 * wraps modulo 2^bits, NaN/inf become 0; to bool, anything non-zero is true).
 */
export function castBetween(from: DType, to: DType): Cast | null {
  if (from === to) return null;
  const decode = decodeFor(from, to);
  const encode = encodeFor(to);
  if (decode === null) return encode;
  if (encode === null) return decode;
  return (raw) => encode(decode(raw));
}

function decodeFor(from: DType, to: DType): Cast | null {
  if (from === 'int64' && INT_BOUNDS[to] !== undefined) {
    // Keep the low 32 bits exactly so narrowing wraps like a C cast even beyond 2^53.
    return (raw) => Number(BigInt.asIntN(32, raw as bigint));
  }
  return from === 'float16' || from === 'bfloat16' || from === 'int64' ? rawToNumber(from) : null;
}

function encodeFor(to: DType): Cast | null {
  switch (to) {
    case 'float16':
    case 'bfloat16':
      return encodeFloat(to) as Cast;
    case 'int64':
      return (value) =>
        Number.isFinite(value) ? BigInt.asIntN(64, BigInt(Math.trunc(value as number))) : 0n;
    case 'bool':
      return (value) => (value !== 0 ? 1 : 0);
    default:
      return null;
  }
}
