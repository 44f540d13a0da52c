/** Element types, named as in torch. float16/bfloat16 are stored as raw 16-bit words. */
export type DType =
  | 'float64'
  | 'float32'
  | 'float16'
  | 'bfloat16'
  | 'int64'
  | 'int32'
  | 'int16'
  | 'int8'
  | 'uint8'
  | 'bool';

export type Device = 'cpu' | `cuda:${number}`;

export type TypedArray =
  | Float64Array
  | Float32Array
  | Uint16Array
  | BigInt64Array
  | Int32Array
  | Int16Array
  | Int8Array
  | Uint8Array;

export type TypedArrayConstructor =
  | Float64ArrayConstructor
  | Float32ArrayConstructor
  | Uint16ArrayConstructor
  | BigInt64ArrayConstructor
  | Int32ArrayConstructor
  | Int16ArrayConstructor
  | Int8ArrayConstructor
  | Uint8ArrayConstructor;

interface DTypeInfo {
  readonly itemSize: number;
  readonly array: TypedArrayConstructor;
  readonly isFloat: boolean;
  /** Stable small integer used in binary headers and shared-memory descriptors. */
  readonly code: number;
}

const INFO: Record<DType, DTypeInfo> = {
  float64: { itemSize: 8, array: Float64Array, isFloat: true, code: 1 },
  float32: { itemSize: 4, array: Float32Array, isFloat: true, code: 2 },
  float16: { itemSize: 2, array: Uint16Array, isFloat: true, code: 3 },
  bfloat16: { itemSize: 2, array: Uint16Array, isFloat: true, code: 4 },
  int64: { itemSize: 8, array: BigInt64Array, isFloat: false, code: 5 },
  int32: { itemSize: 4, array: Int32Array, isFloat: false, code: 6 },
  int16: { itemSize: 2, array: Int16Array, isFloat: false, code: 7 },
  int8: { itemSize: 1, array: Int8Array, isFloat: false, code: 8 },
  uint8: { itemSize: 1, array: Uint8Array, isFloat: false, code: 9 },
  bool: { itemSize: 1, array: Uint8Array, isFloat: false, code: 10 },
};

export const DTYPES = Object.keys(INFO) as readonly DType[];

const BY_CODE = new Map<number, DType>(DTYPES.map((d) => [INFO[d].code, d]));

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && Object.hasOwn(INFO, value);
}

export function assertDType(value: unknown, where: string): DType {
  if (!isDType(value)) {
    throw new TypeError(
      `${where}: unknown dtype ${JSON.stringify(value)}; expected one of ${DTYPES.join(', ')}`,
    );
  }
  return value;
}

export function itemSize(dtype: DType): number {
  return INFO[dtype].itemSize;
}

export function arrayConstructor(dtype: DType): TypedArrayConstructor {
  return INFO[dtype].array;
}

export function isFloatingDType(dtype: DType): boolean {
  return INFO[dtype].isFloat;
}

export function dtypeCode(dtype: DType): number {
  return INFO[dtype].code;
}

export function dtypeFromCode(code: number): DType {
  const d = BY_CODE.get(code);
  if (d === undefined) throw new RangeError(`unknown dtype code ${code}`);
  return d;
}

export function parseDevice(device: unknown, where: string): Device {
  if (device === 'cpu' || (typeof device === 'string' && /^cuda:\d+$/.test(device))) return device as Device;
  throw new TypeError(`${where}: invalid device ${JSON.stringify(device)}; expected 'cpu' or 'cuda:<index>'`);
}
