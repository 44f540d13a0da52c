/**
 * Tensor: a dtype, a shape and element strides over host or device memory.
 * Host storage that tensorcomm allocates is a zero-filled SharedArrayBuffer,
 * so worker threads can share it without copies; device storage comes from the
 * registered GPU backend (tensor/device.ts). Views (narrow, transpose, reshape)
 * share their tensor's storage. Device operations are synchronous for the
 * caller or ordered on the legacy default stream; whatever needs host values
 * (equal, toArray, strided copies) works on a host copy.
 */
import {
  castBetween,
  copiedAs,
  encodeScalar,
  type Raw,
  rawToNumber,
  type Scalar,
  scalarToRaw,
} from './convert.ts';
import { type DeviceStorage, deviceBackend, deviceIndex } from './device.ts';
import {
  arrayConstructor,
  assertDType,
  type Device,
  type DType,
  isFloatingDType,
  itemSize,
  parseDevice,
  type TypedArray,
  type TypedArrayConstructor,
} from './dtype.ts';
import { RuntimeFloat16Array } from './float16-array.ts';
import { narrowToHalfWords, widenHalfWords } from './half.ts';
import { checkInterrupt, INTERRUPT_CHUNK_ELEMENTS } from './interrupt.ts';
import {
  checkIndex,
  checkShape,
  checkSize,
  contiguousStrides,
  describeLayout,
  inferShape,
  isContiguousLayout,
  normalizeDim,
  numelOf,
  offsetOf,
  type ShapeLike,
  sameShape,
  spanOf,
} from './shape.ts';
import { copyStrided, type RawArray } from './strided.ts';

export interface TensorOptions {
  device?: Device;
}

export interface AllcloseOptions {
  /** Relative tolerance (default 1e-5). */
  rtol?: number;
  /** Absolute tolerance (default 1e-8). */
  atol?: number;
}

const TYPED_ARRAY_DTYPES = new Map<string, DType>([
  ['Float64Array', 'float64'],
  ['Float32Array', 'float32'],
  // The runtime's own (Node 24 and later): float16 values, stored as the words a float16 tensor holds.
  ['Float16Array', 'float16'],
  ['BigInt64Array', 'int64'],
  ['Int32Array', 'int32'],
  ['Int16Array', 'int16'],
  ['Int8Array', 'int8'],
  ['Uint8Array', 'uint8'],
]);

const TO_STRING_VALUES = 8;

export class Tensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** In elements. */
  readonly strides: readonly number[];
  readonly device: Device;
  /** Byte offset in the storage (host buffer or device allocation) of element [0,...,0]. */
  readonly byteOffset: number;
  readonly #storage: ArrayBufferLike | DeviceStorage;
  // The layout never changes after construction; these are read on every message a tensor takes part in.
  readonly #numel: number;
  /** numel × item size: looked up by dtype name once, not on every call (a megamorphic keyed load). */
  readonly #nbytes: number;
  readonly #contiguous: boolean;
  #described: string | undefined;
  /** bytes() of a tensor in a SharedArrayBuffer (which never detaches), made once: small calls read it twice each. */
  #sharedBytes: Uint8Array | undefined;

  private constructor(
    storage: ArrayBufferLike | DeviceStorage,
    device: Device,
    byteOffset: number,
    shape: number[],
    strides: number[],
    dtype: DType,
  ) {
    this.#storage = storage;
    this.device = device;
    this.byteOffset = byteOffset;
    this.shape = Object.freeze(shape);
    this.strides = Object.freeze(strides);
    this.dtype = dtype;
    this.#numel = numelOf(shape);
    this.#nbytes = this.#numel * itemSize(dtype);
    this.#contiguous = isContiguousLayout(shape, strides);
  }

  /** A view on existing memory (no copy); strides default to contiguous. */
  static fromBuffer(
    buffer: ArrayBufferLike,
    byteOffset: number,
    shape: ShapeLike,
    dtype: DType,
    strides?: readonly number[],
  ): Tensor {
    const where = 'Tensor.fromBuffer';
    if (!(buffer instanceof ArrayBuffer || buffer instanceof SharedArrayBuffer)) {
      throw new TypeError(
        `${where}: buffer must be an ArrayBuffer or SharedArrayBuffer, got ${typeof buffer}`,
      );
    }
    const { dims, steps } = checkLayout(shape, dtype, strides, where);
    checkIndex(byteOffset, where, 'byteOffset');
    const size = itemSize(dtype);
    if (byteOffset % size !== 0) {
      throw new RangeError(
        `${where}: byteOffset ${byteOffset} is not a multiple of the ${dtype} item size ${size}`,
      );
    }
    const end = byteOffset + spanOf(dims, steps) * size;
    if (end > buffer.byteLength) {
      throw new RangeError(
        `${where}: ${describeLayout(dtype, dims)} with strides [${steps.join(',')}] at byteOffset ${byteOffset} ` +
          `reaches byte ${end}, past the end of the ${buffer.byteLength}-byte buffer`,
      );
    }
    return new Tensor(buffer, 'cpu', byteOffset, dims, steps, dtype);
  }

  /**
   * A view on device memory someone else owns (a peer's allocation, an IPC
   * mapping): nothing is copied, and the memory must outlive the view.
   */
  static fromDevicePointer(
    pointer: bigint,
    device: Device,
    shape: ShapeLike,
    dtype: DType,
    strides?: readonly number[],
  ): Tensor {
    const where = 'Tensor.fromDevicePointer';
    if (typeof pointer !== 'bigint' || pointer < 0n) {
      throw new TypeError(
        `${where}: pointer must be a device address (a non-negative bigint), got ${String(pointer)}`,
      );
    }
    const target = parseDevice(device, where);
    if (target === 'cpu') {
      throw new TypeError(
        `${where}: device must be 'cuda:<index>', got 'cpu'; use Tensor.fromBuffer for host memory`,
      );
    }
    const { dims, steps } = checkLayout(shape, dtype, strides, where);
    const size = itemSize(dtype);
    if (pointer % BigInt(size) !== 0n || (pointer === 0n && numelOf(dims) > 0)) {
      throw new RangeError(
        `${where}: pointer 0x${pointer.toString(16)} is not a valid address for ${describeLayout(dtype, dims)} ` +
          `(null, or not a multiple of the ${dtype} item size ${size})`,
      );
    }
    const index = deviceIndex(target);
    deviceBackend(target, where).checkDevice(index, where);
    const storage: DeviceStorage = { device: index, pointer };
    return new Tensor(storage, target, 0, dims, steps, dtype);
  }

  /** Zero-filled, like `zeros` (fresh SharedArrayBuffer storage is always zeroed; device memory is cleared). */
  static empty(shape: ShapeLike, dtype: DType = 'float32', opts?: TensorOptions): Tensor {
    return Tensor.#allocate('Tensor.empty', shape, dtype, opts).#zeroed();
  }

  static zeros(shape: ShapeLike, dtype: DType = 'float32', opts?: TensorOptions): Tensor {
    return Tensor.#allocate('Tensor.zeros', shape, dtype, opts).#zeroed();
  }

  static ones(shape: ShapeLike, dtype: DType = 'float32', opts?: TensorOptions): Tensor {
    const out = Tensor.#allocate('Tensor.ones', shape, dtype, opts);
    return out.#fill(scalarToRaw(1, out.dtype) as Raw);
  }

  /** dtype defaults to int64 for a bigint value, bool for a boolean, float32 otherwise. */
  static full(shape: ShapeLike, value: Scalar, dtype?: DType, opts?: TensorOptions): Tensor {
    const where = 'Tensor.full';
    const dt = assertDType(dtype ?? inferDType([value]), where);
    const raw = encodeScalar(value, dt, where, 'value');
    return Tensor.#allocate(where, shape, dt, opts).#fill(raw);
  }

  /** 0, 1, ..., ceil(end)-1. Like torch, an integral `end` gives int64 and a fractional one float32. */
  static arange(end: number, dtype?: DType, opts?: TensorOptions): Tensor {
    const where = 'Tensor.arange';
    if (typeof end !== 'number' || !Number.isFinite(end) || end < 0) {
      throw new RangeError(`${where}: end must be a finite non-negative number, got ${String(end)}`);
    }
    const dt = assertDType(dtype ?? (Number.isInteger(end) ? 'int64' : 'float32'), where);
    if (dt === 'bool') throw new TypeError(`${where}: arange is not defined for dtype bool`);
    const length = Math.ceil(end);
    // Values grow monotonically, so the last one is the only one that can fail to fit.
    if (length > 0) encodeScalar(length - 1, dt, where, 'value');
    const out = Tensor.#allocate(where, [length], dt, opts);
    const host = out.device === 'cpu' ? out : Tensor.#host([length], dt, where);
    const data = host.data as RawArray;
    for (let i = 0; i < length; i++) data[i] = scalarToRaw(i, dt) as Raw;
    if (host !== out) Tensor.#copyElements(out, host);
    return out;
  }

  /**
   * Copies `values` into new shared storage. A typed array fixes the source
   * dtype (a Uint16Array only as raw float16/bfloat16 words, with that dtype
   * given; a Float16Array, Node 24 and later, as float16) and is converted
   * when `dtype` differs; a plain array is encoded
   * element by element (dtype defaults to int64 for all-bigint, bool for
   * all-boolean, float32 otherwise). `shape` defaults to [values.length] and
   * may contain one -1.
   */
  static fromArray(values: TypedArray | readonly Scalar[], shape?: ShapeLike, dtype?: DType): Tensor {
    const where = 'Tensor.fromArray';
    if (Array.isArray(values)) {
      const dt = assertDType(dtype ?? inferDType(values), where);
      const out = Tensor.#allocateFor(where, shape ?? [values.length], values.length, dt);
      const data = out.data as RawArray;
      for (let i = 0; i < values.length; i++) {
        data[i] = scalarToRaw(values[i], dt) ?? encodeScalar(values[i], dt, where, `values[${i}]`);
      }
      return out;
    }
    const typed = values as TypedArray;
    const from = typedArrayDType(typed, dtype, where);
    const out = Tensor.#allocateFor(
      where,
      shape ?? [typed.length],
      typed.length,
      assertDType(dtype ?? from, where),
    );
    Tensor.#copyElements(
      out,
      new Tensor(typed.buffer, 'cpu', typed.byteOffset, out.shape.slice(), out.strides.slice(), from),
    );
    return out;
  }

  /** Concatenates along `dim`; all tensors need the same dtype and the same sizes in the other dims. */
  static cat(tensors: readonly Tensor[], dim = 0): Tensor {
    const where = 'Tensor.cat';
    if (!Array.isArray(tensors as unknown) || tensors.length === 0) {
      throw new TypeError(`${where}: tensors must be a non-empty array of Tensors`);
    }
    tensors.forEach((t, i) => {
      assertTensor(t, where, `tensors[${i}]`);
    });
    const first = tensors[0];
    const d = normalizeDim(dim, first.shape.length, where);
    let total = 0;
    tensors.forEach((t, i) => {
      if (t.device !== first.device) {
        throw new TypeError(
          `${where}: tensors[${i}] is on ${t.device} but tensors[0] is on ${first.device}; move them to one device with .to() first`,
        );
      }
      if (t.dtype !== first.dtype) {
        throw new TypeError(
          `${where}: tensors[${i}] ${t.describe()} has a different dtype than tensors[0] ${first.describe()}`,
        );
      }
      if (
        t.shape.length !== first.shape.length ||
        t.shape.some((size, k) => k !== d && size !== first.shape[k])
      ) {
        throw new RangeError(
          `${where}: tensors[${i}] ${t.describe()} does not match tensors[0] ${first.describe()} outside dim ${d}`,
        );
      }
      total += t.shape[d];
    });
    const shape = first.shape.slice();
    shape[d] = total;
    checkSize(shape, first.dtype, where);
    const out = Tensor.#blank(first.device, shape, first.dtype, where);
    let offset = 0;
    for (const t of tensors) {
      Tensor.#copyElements(out.narrow(d, offset, t.shape[d]), t);
      offset += t.shape[d];
    }
    return out;
  }

  get numel(): number {
    return this.#numel;
  }

  get nbytes(): number {
    return this.#nbytes;
  }

  /** Row-major; dims of size 1 may have any stride, and an empty tensor is contiguous. */
  isContiguous(): boolean {
    return this.#contiguous;
  }

  /** True for host storage in a SharedArrayBuffer (never for a device tensor). */
  isShared(): boolean {
    return this.#storage instanceof SharedArrayBuffer;
  }

  /** Host storage; a SharedArrayBuffer when tensorcomm allocated it. Device tensors have none. */
  get buffer(): ArrayBufferLike {
    requireHost(this, 'Tensor.buffer');
    return this.#storage as ArrayBufferLike;
  }

  /** Device address of element [0,...,0] (a TypeError on a host tensor). */
  get devicePointer(): bigint {
    if (this.device === 'cpu') {
      throw new TypeError(
        `Tensor.devicePointer: ${this.describe()} is on 'cpu'; only device tensors have one`,
      );
    }
    return (this.#storage as DeviceStorage).pointer + BigInt(this.byteOffset);
  }

  /**
   * A typed array over exactly this tensor's elements, sharing its memory
   * (Uint16Array for float16/bfloat16 raw words, BigInt64Array for int64,
   * Uint8Array for bool). Host tensors only.
   */
  get data(): TypedArray {
    requireHost(this, 'Tensor.data');
    requireContiguous(this, 'Tensor.data');
    return typedView(this, this.numel);
  }

  /** The tensor's nbytes as a Uint8Array sharing its memory. Host tensors only. */
  bytes(): Uint8Array {
    if (this.#sharedBytes) return this.#sharedBytes;
    requireHost(this, 'Tensor.bytes');
    requireContiguous(this, 'Tensor.bytes');
    const bytes = new Uint8Array(this.#storage as ArrayBufferLike, this.byteOffset, this.nbytes);
    if (this.#storage instanceof SharedArrayBuffer) this.#sharedBytes = bytes;
    return bytes;
  }

  /** e.g. 'float32[4,8]'; a scalar is 'float32[]'. */
  describe(): string {
    // Every call's signature quotes it: made once (dtype and shape never change).
    this.#described ??= describeLayout(this.dtype, this.shape);
    return this.#described;
  }

  /** This tensor when already contiguous, else a contiguous copy. */
  contiguous(): Tensor {
    return this.isContiguous() ? this : this.clone();
  }

  /** A contiguous copy in fresh storage on the same device (shared storage on the host). */
  clone(): Tensor {
    const out = Tensor.#blank(this.device, this.shape.slice(), this.dtype, 'Tensor.clone');
    Tensor.#copyElements(out, this);
    return out;
  }

  /** A view with a new shape (one entry may be -1); contiguous tensors only. */
  reshape(shape: ShapeLike): Tensor {
    const where = 'Tensor.reshape';
    requireContiguous(this, where);
    const dims = inferShape(shape, this.numel, where);
    return new Tensor(this.#storage, this.device, this.byteOffset, dims, contiguousStrides(dims), this.dtype);
  }

  /** A view on `length` entries of `dim` from `start` (negative start counts from the end). */
  narrow(dim: number, start: number, length: number): Tensor {
    const where = 'Tensor.narrow';
    const d = normalizeDim(dim, this.shape.length, where);
    const size = this.shape[d];
    if (typeof start !== 'number' || !Number.isInteger(start)) {
      throw new TypeError(`${where}: start must be an integer, got ${String(start)}`);
    }
    if (start < -size || start > size) {
      throw new RangeError(`${where}: start ${start} is out of range for size ${size} of dim ${d}`);
    }
    const first = start < 0 ? start + size : start;
    checkIndex(length, where, 'length');
    if (first + length > size) {
      throw new RangeError(`${where}: start ${first} + length ${length} exceeds size ${size} of dim ${d}`);
    }
    const shape = this.shape.slice();
    shape[d] = length;
    // An empty view keeps its parent's offset, which is known to lie inside the buffer.
    const byteOffset =
      numelOf(shape) === 0
        ? this.byteOffset
        : this.byteOffset + first * this.strides[d] * itemSize(this.dtype);
    return new Tensor(this.#storage, this.device, byteOffset, shape, this.strides.slice(), this.dtype);
  }

  /** A view with dims `dim0` and `dim1` swapped. */
  transpose(dim0: number, dim1: number): Tensor {
    const where = 'Tensor.transpose';
    const a = normalizeDim(dim0, this.shape.length, where, 'dim0');
    const b = normalizeDim(dim1, this.shape.length, where, 'dim1');
    const shape = this.shape.slice();
    const strides = this.strides.slice();
    [shape[a], shape[b]] = [shape[b], shape[a]];
    [strides[a], strides[b]] = [strides[b], strides[a]];
    return new Tensor(this.#storage, this.device, this.byteOffset, shape, strides, this.dtype);
  }

  /**
   * Copies `src` (same shape, any dtype and layout) into this tensor and
   * returns it. Between dtypes, values convert like a typed-array store:
   * float to integer truncates and wraps, NaN/inf become 0, non-zero is true.
   * Either tensor may be on any device.
   */
  copy_(src: Tensor): this {
    const where = 'Tensor.copy_';
    assertTensor(src, where, 'src');
    if (!sameShape(src.shape, this.shape)) {
      throw new RangeError(
        `${where}: source ${src.describe()} does not match the shape of destination ${this.describe()}`,
      );
    }
    Tensor.#copyElements(this, src);
    return this;
  }

  /** Sets every element to `value`, rounded to the dtype; a value the dtype cannot hold is a RangeError. */
  fill_(value: Scalar): this {
    return this.#fill(encodeScalar(value, this.dtype, 'Tensor.fill_', 'value'));
  }

  /** This tensor when it already lives on `device`, else a contiguous copy there. */
  to(device: Device): Tensor {
    const where = 'Tensor.to';
    const target = parseDevice(device, where);
    if (target === this.device) return this;
    const out = Tensor.#blank(target, this.shape.slice(), this.dtype, where);
    Tensor.#copyElements(out, this);
    return out;
  }

  /** torch.chunk: pieces of ceil(size / chunks) along `dim`, so fewer than `chunks` may come back. */
  chunk(chunks: number, dim = 0): Tensor[] {
    const where = 'Tensor.chunk';
    if (typeof chunks !== 'number' || !Number.isSafeInteger(chunks) || chunks < 1) {
      throw new RangeError(`${where}: chunks must be a positive integer, got ${String(chunks)}`);
    }
    const d = normalizeDim(dim, this.shape.length, where);
    const size = this.shape[d];
    // As in torch, an empty dim still yields `chunks` (empty) pieces.
    return size === 0
      ? this.#pieces(new Array<number>(chunks).fill(0), d)
      : this.split(Math.ceil(size / chunks), d);
  }

  /** torch.split: views of `sizes` entries each (the last may be shorter), or of the listed sizes. */
  split(sizes: number | readonly number[], dim = 0): Tensor[] {
    const where = 'Tensor.split';
    const d = normalizeDim(dim, this.shape.length, where);
    const size = this.shape[d];
    if (typeof sizes === 'number') {
      const step = checkIndex(sizes, where, 'split size');
      if (step === 0 && size > 0) {
        throw new RangeError(
          `${where}: split size 0 is only valid for an empty dim, but dim ${d} has size ${size}`,
        );
      }
      const count = step === 0 ? 1 : Math.max(1, Math.ceil(size / step));
      return this.#pieces(
        Array.from({ length: count }, (_, i) => Math.min(step, size - i * step)),
        d,
      );
    }
    const pieces = checkShape(sizes, where, 'sizes');
    const sum = pieces.reduce((a, b) => a + b, 0);
    if (sum !== size) {
      throw new RangeError(
        `${where}: sizes [${pieces.join(',')}] sum to ${sum}, but dim ${d} has size ${size}`,
      );
    }
    return this.#pieces(pieces, d);
  }

  /** Same shape, dtype and values; as in torch, NaN differs from itself and -0 equals 0. */
  equal(other: Tensor): boolean {
    assertTensor(other, 'Tensor.equal', 'other');
    if (other.dtype !== this.dtype || !sameShape(other.shape, this.shape)) return false;
    const decode = isFloatingDType(this.dtype) ? rawToNumber(this.dtype) : (raw: Raw) => raw;
    return everyPair(this.#onHost(), other.#onHost(), (a, b) => decode(a) === decode(b));
  }

  /**
   * |this - other| <= atol + rtol * |other| elementwise, as torch.allclose
   * (NaN is never close; equal infinities are). Shapes must match; dtypes may
   * differ, values compare as numbers.
   */
  allclose(other: Tensor, opts: AllcloseOptions = {}): boolean {
    const where = 'Tensor.allclose';
    assertTensor(other, where, 'other');
    const { rtol = 1e-5, atol = 1e-8 } = opts;
    for (const [name, tol] of [
      ['rtol', rtol],
      ['atol', atol],
    ] as const) {
      if (typeof tol !== 'number' || !(tol >= 0)) {
        throw new RangeError(`${where}: ${name} must be a non-negative number, got ${String(tol)}`);
      }
    }
    if (!sameShape(other.shape, this.shape)) {
      throw new RangeError(`${where}: shapes differ: ${this.describe()} vs ${other.describe()}`);
    }
    const decodeA = rawToNumber(this.dtype);
    const decodeB = rawToNumber(other.dtype);
    return everyPair(this.#onHost(), other.#onHost(), (rawA, rawB) => {
      const a = decodeA(rawA);
      const b = decodeB(rawB);
      const error = Math.abs(a - b);
      return a === b || (Number.isFinite(error) && error <= atol + rtol * Math.abs(b));
    });
  }

  /**
   * The elements in row-major order as plain numbers: float16/bfloat16
   * decoded, bool as 0/1, int64 exact or a RangeError beyond 2^53 - 1.
   */
  toArray(): number[] {
    const values = elementView(this.#onHost().contiguous());
    const decode = rawToNumber(copiedAs(this.dtype));
    const out = new Array<number>(this.numel);
    for (let i = 0; i < out.length; i++) out[i] = decode(values[i]);
    const inexact = this.dtype === 'int64' ? out.findIndex((v) => !Number.isSafeInteger(v)) : -1;
    if (inexact !== -1) {
      throw new RangeError(
        `Tensor.toArray: int64 element ${values[inexact]} at index ${inexact} does not fit a number exactly; read .data (a BigInt64Array) instead`,
      );
    }
    return out;
  }

  /** e.g. 'Tensor(float32[2,3], [0, 1, 2, 3, 4, 5])' (plus `, device='cuda:0'`), showing at most 8 values. */
  toString(): string {
    const shown = Math.min(this.numel, TO_STRING_VALUES);
    const view = rawView(this.#onHost());
    const decode: (raw: Raw) => Raw = this.dtype === 'int64' ? (raw) => raw : rawToNumber(this.dtype);
    const values = Array.from({ length: shown }, (_, i) =>
      String(decode(view[offsetOf(i, this.shape, this.strides)])),
    );
    if (this.numel > shown) values.push(`… ${this.numel - shown} more`);
    const device = this.device === 'cpu' ? '' : `, device='${this.device}'`;
    return `Tensor(${this.describe()}, [${values.join(', ')}]${device})`;
  }

  static #allocate(where: string, shape: ShapeLike, dtype: DType, opts: TensorOptions | undefined): Tensor {
    const dt = assertDType(dtype, where);
    const dims = checkShape(shape, where);
    const device = parseDevice(opts?.device ?? 'cpu', where);
    checkSize(dims, dt, where);
    return Tensor.#blank(device, dims, dt, where);
  }

  /** Storage for `numel` given values laid out as `shape` (which may contain one -1). */
  static #allocateFor(where: string, shape: ShapeLike, numel: number, dtype: DType): Tensor {
    const dims = inferShape(shape, numel, where);
    checkSize(dims, dtype, where);
    return Tensor.#host(dims, dtype, where);
  }

  /** Fresh contiguous storage for a layout that has passed checkSize (uninitialised on a device). */
  static #blank(device: Device, shape: number[], dtype: DType, where: string): Tensor {
    if (device === 'cpu') return Tensor.#host(shape, dtype, where);
    const storage = deviceBackend(device, where).allocate(
      deviceIndex(device),
      numelOf(shape) * itemSize(dtype),
      where,
    );
    return new Tensor(storage, device, 0, shape, contiguousStrides(shape), dtype);
  }

  /** Fresh zero-filled contiguous host storage for a layout that has passed checkSize. */
  static #host(shape: number[], dtype: DType, where: string): Tensor {
    const buffer = allocateHost(SharedArrayBuffer, numelOf(shape) * itemSize(dtype), dtype, shape, where);
    return new Tensor(buffer, 'cpu', 0, shape, contiguousStrides(shape), dtype);
  }

  static #copyElements(dst: Tensor, src: Tensor): void {
    if (dst.numel === 0) return;
    if (dst.device === 'cpu' && src.device === 'cpu') {
      copyHostElements(dst, src);
      return;
    }
    if (dst.dtype === src.dtype && dst.isContiguous() && src.isContiguous() && !sharesDeviceBytes(dst, src)) {
      const device = dst.device === 'cpu' ? src.device : dst.device;
      deviceBackend(device, 'Tensor.copy_').copy(
        deviceIndex(device),
        dst.#endpoint(),
        src.#endpoint(),
        dst.nbytes,
      );
      return;
    }
    // Conversions and strided layouts reuse the host kernel: correct first, one staging copy each way.
    const source = src.#onHost();
    if (dst.device === 'cpu') {
      copyHostElements(dst, source);
      return;
    }
    const staged = dst.isContiguous()
      ? Tensor.#host(dst.shape.slice(), dst.dtype, 'Tensor.copy_')
      : dst.#onHost();
    copyHostElements(staged, source);
    dst.#upload(staged);
  }

  /** This host tensor, or a host tensor with this layout over a copy of the device memory it spans. */
  #onHost(): Tensor {
    if (this.device === 'cpu') return this;
    const bytes = spanBytes(this);
    const mirror = allocateHost(ArrayBuffer, bytes, this.dtype, this.shape, 'Tensor.to');
    if (bytes > 0) {
      deviceBackend(this.device, 'Tensor.to').copy(
        deviceIndex(this.device),
        new Uint8Array(mirror),
        this.devicePointer,
        bytes,
      );
    }
    return new Tensor(mirror, 'cpu', 0, this.shape.slice(), this.strides.slice(), this.dtype);
  }

  /**
   * Writes `staged` (a host tensor with this device tensor's layout, from offset 0) over
   * the device memory this tensor spans; elements between strided rows go back unchanged.
   */
  #upload(staged: Tensor): void {
    const bytes = spanBytes(this);
    deviceBackend(this.device, 'Tensor.copy_').copy(
      deviceIndex(this.device),
      this.devicePointer,
      new Uint8Array(staged.#storage as ArrayBufferLike, 0, bytes),
      bytes,
    );
  }

  /** What cudaMemcpy takes for a contiguous tensor: its host bytes or its device address. */
  #endpoint(): Uint8Array | bigint {
    return this.device === 'cpu'
      ? new Uint8Array(this.#storage as ArrayBufferLike, this.byteOffset, this.nbytes)
      : this.devicePointer;
  }

  /** Host storage starts zeroed; device memory from the allocator does not. */
  #zeroed(): this {
    return this.device === 'cpu' ? this : this.#fill(scalarToRaw(0, this.dtype) as Raw);
  }

  #fill(raw: Raw): this {
    const source = new (arrayConstructor(this.dtype))(1);
    (source as RawArray)[0] = raw;
    if (this.device !== 'cpu') return this.#fillDevice(raw, new Uint8Array(source.buffer));
    // A zero-stride source repeats the one element over any destination layout.
    copyStrided(
      this.shape,
      rawView(this),
      this.strides,
      source as RawArray,
      new Array(this.shape.length).fill(0),
      null,
    );
    return this;
  }

  /** One memset when every byte of the value is the same, else a filled host copy uploaded. */
  #fillDevice(raw: Raw, pattern: Uint8Array): this {
    if (this.numel === 0) return this;
    if (this.isContiguous() && pattern.every((byte) => byte === pattern[0])) {
      deviceBackend(this.device, 'Tensor.fill_').memset(
        deviceIndex(this.device),
        this.devicePointer,
        pattern[0],
        this.nbytes,
      );
      return this;
    }
    const staged = this.isContiguous()
      ? Tensor.#host(this.shape.slice(), this.dtype, 'Tensor.fill_')
      : this.#onHost();
    staged.#fill(raw);
    this.#upload(staged);
    return this;
  }

  #pieces(sizes: readonly number[], dim: number): Tensor[] {
    let offset = 0;
    return sizes.map((length) => {
      const piece = this.narrow(dim, offset, length);
      offset += length;
      return piece;
    });
  }
}

function assertTensor(value: unknown, where: string, what: string): asserts value is Tensor {
  if (!(value instanceof Tensor))
    throw new TypeError(`${where}: ${what} must be a Tensor, got ${typeof value}`);
}

function requireHost(tensor: Tensor, where: string): void {
  if (tensor.device !== 'cpu') {
    throw new TypeError(
      `${where}: ${tensor.describe()} is on ${tensor.device}, not in host memory; call .to('cpu') for a host copy first`,
    );
  }
}

function requireContiguous(tensor: Tensor, where: string): void {
  if (!tensor.isContiguous()) {
    throw new TypeError(
      `${where}: ${tensor.describe()} with strides [${tensor.strides.join(',')}] is not contiguous; call .contiguous() first`,
    );
  }
}

/** Typed array whose index 0 is element [0,...,0], long enough for every addressed element. */
function rawView(tensor: Tensor): RawArray {
  return typedView(tensor, spanOf(tensor.shape, tensor.strides)) as RawArray;
}

/** rawView, float16 as the numbers the runtime's Float16Array reads and writes where it has one (copiedAs). */
function elementView(tensor: Tensor): RawArray {
  if (copiedAs(tensor.dtype) === tensor.dtype) return rawView(tensor);
  return typedView(tensor, spanOf(tensor.shape, tensor.strides), RuntimeFloat16Array) as RawArray;
}

/** `length` elements from the tensor's first, viewed through `view` (its dtype's array by default). */
function typedView(
  tensor: Tensor,
  length: number,
  view: TypedArrayConstructor = arrayConstructor(tensor.dtype),
): TypedArray {
  // The union of constructors loses their generic buffer type; a SharedArrayBuffer is fine at runtime.
  return new view(tensor.buffer as ArrayBuffer, tensor.byteOffset, length);
}

/** Bytes from element [0,...,0] to the end of the last addressed element. */
function spanBytes(tensor: Tensor): number {
  return spanOf(tensor.shape, tensor.strides) * itemSize(tensor.dtype);
}

function byteRange(tensor: Tensor): [number, number] {
  return [tensor.byteOffset, tensor.byteOffset + spanBytes(tensor)];
}

/** cudaMemcpy between overlapping device ranges is undefined, so such copies are staged through the host. */
function sharesDeviceBytes(a: Tensor, b: Tensor): boolean {
  if (a.device === 'cpu' || b.device === 'cpu') return false;
  const [aStart, bStart] = [a.devicePointer, b.devicePointer];
  return bStart < aStart + BigInt(spanBytes(a)) && aStart < bStart + BigInt(spanBytes(b));
}

/** Both tensors on the host, dst not empty. */
function copyHostElements(dst: Tensor, src: Tensor): void {
  const [dstStart, dstEnd] = byteRange(dst);
  const [srcStart, srcEnd] = byteRange(src);
  // Element loops would read words already overwritten, so overlapping memory is staged through a copy.
  if (dst.buffer === src.buffer && srcStart < dstEnd && dstStart < srcEnd) src = src.clone();
  if (copyFloat32Bits(dst, src)) return;
  // Between dtypes, float16 elements convert as numbers where the runtime can (a whole run at a time);
  // a copy within one dtype moves the words, NaN payloads included.
  const converting = src.dtype !== dst.dtype;
  copyStrided(
    dst.shape,
    converting ? elementView(dst) : rawView(dst),
    dst.strides,
    converting ? elementView(src) : rawView(src),
    src.strides,
    converting ? castBetween(copiedAs(src.dtype), copiedAs(dst.dtype)) : null,
  );
}

/**
 * A contiguous copy between float32 and a half type converts float32 bit patterns a block at a time
 * (half.ts), a tenth of the element loop's cost. float16 through the runtime's Float16Array
 * (copiedAs) is left to the element views, which convert faster still. False for any other copy.
 */
function copyFloat32Bits(dst: Tensor, src: Tensor): boolean {
  const [from, to] = [src.dtype, dst.dtype];
  if (!dst.isContiguous() || !src.isContiguous()) return false;
  const bits = (t: Tensor) => new Uint32Array(t.buffer, t.byteOffset, t.numel);
  const words = (t: Tensor) => new Uint16Array(t.buffer, t.byteOffset, t.numel);
  let convert: (start: number, end: number) => void;
  if (from === 'float32' && isHalf(to) && copiedAs(to) === to) {
    const [into, out, narrow] = [words(dst), bits(src), narrowToHalfWords(to)];
    convert = (start, end) => narrow(into.subarray(start, end), out.subarray(start, end));
  } else if (to === 'float32' && isHalf(from) && copiedAs(from) === from) {
    const [into, out, widen] = [bits(dst), words(src), widenHalfWords(from)];
    convert = (start, end) => widen(into.subarray(start, end), out.subarray(start, end));
  } else {
    return false;
  }
  // In blocks, so that a copy over gigabytes can be stopped by an abort.
  for (let start = 0; start < dst.numel; start += INTERRUPT_CHUNK_ELEMENTS) {
    convert(start, Math.min(dst.numel, start + INTERRUPT_CHUNK_ELEMENTS));
    checkInterrupt();
  }
  return true;
}

const isHalf = (dtype: DType): dtype is 'float16' | 'bfloat16' => dtype === 'float16' || dtype === 'bfloat16';

function allocateHost<B extends ArrayBuffer | SharedArrayBuffer>(
  kind: new (bytes: number) => B,
  bytes: number,
  dtype: DType,
  shape: readonly number[],
  where: string,
): B {
  try {
    return new kind(bytes);
  } catch (cause) {
    throw new RangeError(
      `${where}: cannot allocate ${bytes} bytes for ${describeLayout(dtype, shape)}: ${(cause as Error).message}`,
      { cause },
    );
  }
}

/** Validated shape and strides (contiguous when omitted) for a view on existing memory. */
function checkLayout(
  shape: ShapeLike,
  dtype: DType,
  strides: readonly number[] | undefined,
  where: string,
): { dims: number[]; steps: number[] } {
  assertDType(dtype, where);
  const dims = checkShape(shape, where);
  const steps = strides === undefined ? contiguousStrides(dims) : checkShape(strides, where, 'strides');
  if (steps.length !== dims.length) {
    throw new RangeError(`${where}: strides [${steps.join(',')}] do not match shape [${dims.join(',')}]`);
  }
  checkSize(dims, dtype, where);
  return { dims, steps };
}

function everyPair(a: Tensor, b: Tensor, match: (x: Raw, y: Raw) => boolean): boolean {
  const x = a.contiguous().data as RawArray;
  const y = b.contiguous().data as RawArray;
  for (let i = 0; i < a.numel; i++) if (!match(x[i], y[i])) return false;
  return true;
}

function inferDType(values: readonly unknown[]): DType {
  if (values.length > 0 && values.every((v) => typeof v === 'bigint')) return 'int64';
  if (values.length > 0 && values.every((v) => typeof v === 'boolean')) return 'bool';
  return 'float32';
}

/** The dtype a typed array's elements have; a Uint16Array is raw half-precision words of the given dtype. */
function typedArrayDType(values: unknown, dtype: DType | undefined, where: string): DType {
  const tag = ArrayBuffer.isView(values)
    ? (values as { [Symbol.toStringTag]?: string })[Symbol.toStringTag]
    : undefined;
  if (tag === 'Uint16Array') {
    if (dtype === 'float16' || dtype === 'bfloat16') return dtype;
    throw new TypeError(
      `${where}: a Uint16Array holds raw float16/bfloat16 words; pass dtype 'float16' or 'bfloat16'`,
    );
  }
  const dt = tag === undefined ? undefined : TYPED_ARRAY_DTYPES.get(tag);
  if (dt === undefined) {
    throw new TypeError(
      `${where}: values must be an array of numbers, bigints or booleans, or one of ` +
        `${[...TYPED_ARRAY_DTYPES.keys(), 'Uint16Array'].join(', ')}; got ${tag ?? typeof values}`,
    );
  }
  return dt;
}
