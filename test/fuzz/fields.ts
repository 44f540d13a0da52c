/**
 * Where the fields of an encoded message lie, and the values that break
 * decoders when written there: a target describes its message with a
 * FieldLayout walked in the encoder's order, and the mutator (mutants.ts)
 * sets each field to each of its edge values.
 */

export interface Field {
  readonly name: string;
  readonly at: number;
  readonly width: 1 | 2 | 4 | 8;
  /** A float64, not an unsigned integer. */
  readonly float: boolean;
  readonly littleEndian: boolean;
  /** The decoder's bound for the field (a limit it enforces), so limit and limit + 1 are tried. */
  readonly limit?: number;
}

/** A cursor over a message in its encoder's order, noting each field it passes. */
export class FieldLayout {
  readonly fields: Field[] = [];
  #at = 0;
  constructor(private readonly littleEndian: boolean) {}

  u8(name: string, limit?: number): this {
    return this.#field(name, 1, false, limit);
  }

  u16(name: string, limit?: number): this {
    return this.#field(name, 2, false, limit);
  }

  u32(name: string, limit?: number): this {
    return this.#field(name, 4, false, limit);
  }

  u64(name: string, limit?: number): this {
    return this.#field(name, 8, false, limit);
  }

  f64(name: string, limit?: number): this {
    return this.#field(name, 8, true, limit);
  }

  /** Bytes that are not a field (a name, a payload, a serialized value). */
  skip(bytes: number): this {
    this.#at += bytes;
    return this;
  }

  #field(name: string, width: Field['width'], float: boolean, limit?: number): this {
    this.fields.push({ name, at: this.#at, width, float, littleEndian: this.littleEndian, limit });
    this.#at += width;
    return this;
  }
}

/** An unsigned integer field's value as a bigint (u64 needs one), a float field's as a number. */
export type FieldValue = bigint | number;

export function writeField(bytes: Uint8Array, field: Field, value: FieldValue): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const { at, littleEndian } = field;
  if (field.float) view.setFloat64(at, Number(value), littleEndian);
  else if (field.width === 8) view.setBigUint64(at, BigInt(value), littleEndian);
  else if (field.width === 4) view.setUint32(at, Number(value), littleEndian);
  else if (field.width === 2) view.setUint16(at, Number(value), littleEndian);
  else view.setUint8(at, Number(value));
}

function readField(bytes: Uint8Array, field: Field): FieldValue {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const { at, littleEndian } = field;
  if (field.float) return view.getFloat64(at, littleEndian);
  if (field.width === 8) return view.getBigUint64(at, littleEndian);
  if (field.width === 4) return BigInt(view.getUint32(at, littleEndian));
  if (field.width === 2) return BigInt(view.getUint16(at, littleEndian));
  return BigInt(view.getUint8(at));
}

/** Values past which a double stops counting exactly, or a typed array stops indexing. */
const FLOAT_EDGES = [-1, -0, 0.5, Number.NaN, Infinity, -Infinity, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53];

/**
 * The values `field` of `bytes` is set to: 0, 1, the decoder's limit and one
 * past it, exactly what remains of the message and one past that, the
 * type's largest value and its sign bit, the current value ±1; a float field
 * also gets the values a double or an array index breaks at.
 */
export function edgeValues(bytes: Uint8Array, field: Field): FieldValue[] {
  const current = readField(bytes, field);
  const remaining = bytes.length - (field.at + field.width);
  const counted = [0, 1, remaining, remaining + 1, bytes.length + 1];
  if (field.limit !== undefined) counted.push(field.limit, field.limit + 1);
  if (field.float) {
    const values = [...counted, ...FLOAT_EDGES, Number(current) + 1, Number(current) - 1];
    return [...new Set(values)].filter((v) => !Object.is(v, current));
  }
  const integer = BigInt(current);
  const max = (1n << BigInt(8 * field.width)) - 1n;
  const values = [...counted.map(BigInt), max, max >> 1n, (max >> 1n) + 1n, integer + 1n, integer - 1n];
  const unique = new Set(values.filter((v) => v >= 0n && v <= max && v !== integer));
  return [...unique];
}
