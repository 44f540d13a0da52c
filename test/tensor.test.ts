import { constants } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { DTYPES, type DType } from '../src/tensor/dtype.ts';
import { Tensor } from '../src/tensor/tensor.ts';

const ARRAY_TYPES: Record<DType, unknown> = {
  float64: Float64Array,
  float32: Float32Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int64: BigInt64Array,
  int32: Int32Array,
  int16: Int16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

const ITEM_SIZES: Record<DType, number> = {
  float64: 8,
  float32: 4,
  float16: 2,
  bfloat16: 2,
  int64: 8,
  int32: 4,
  int16: 2,
  int8: 1,
  uint8: 1,
  bool: 1,
};

/** The stored word for `value` in each dtype (small integers only). */
function word(dtype: DType, value: number): number | bigint {
  if (dtype === 'float16') return { 0: 0, 1: 0x3c00, 2: 0x4000, 3: 0x4200, 4: 0x4400 }[value]!;
  if (dtype === 'bfloat16') return { 0: 0, 1: 0x3f80, 2: 0x4000, 3: 0x4040, 4: 0x4080 }[value]!;
  if (dtype === 'int64') return BigInt(value);
  if (dtype === 'bool') return value === 0 ? 0 : 1;
  return value;
}

const matrix = () => Tensor.arange(12, 'float32').reshape([3, 4]);

describe('factories', () => {
  it.each(DTYPES)('zeros/empty/ones/full/fromArray for %s', (dtype) => {
    for (const make of [Tensor.zeros, Tensor.empty]) {
      const t = make([2, 3], dtype);
      expect(t.dtype).toBe(dtype);
      expect(t.shape).toEqual([2, 3]);
      expect(t.strides).toEqual([3, 1]);
      expect(t.device).toBe('cpu');
      expect(t.numel).toBe(6);
      expect(t.nbytes).toBe(6 * ITEM_SIZES[dtype]);
      expect(t.isShared()).toBe(true);
      expect(t.buffer).toBeInstanceOf(SharedArrayBuffer);
      expect(t.isContiguous()).toBe(true);
      expect(t.data).toBeInstanceOf(ARRAY_TYPES[dtype]);
      expect(t.toArray()).toEqual([0, 0, 0, 0, 0, 0]);
    }
    const ones = Tensor.ones([3], dtype);
    expect([...ones.data]).toEqual([word(dtype, 1), word(dtype, 1), word(dtype, 1)]);
    expect(ones.toArray()).toEqual([1, 1, 1]);

    const full = Tensor.full([2], 3, dtype);
    expect([...full.data]).toEqual([word(dtype, 3), word(dtype, 3)]);
    expect(full.toArray()).toEqual(dtype === 'bool' ? [1, 1] : [3, 3]);

    const t = Tensor.fromArray([1, 0, 2, 4], [2, 2], dtype);
    expect(t.shape).toEqual([2, 2]);
    expect([...t.data]).toEqual([1, 0, 2, 4].map((v) => word(dtype, v)));
    expect(t.toArray()).toEqual(dtype === 'bool' ? [1, 0, 1, 1] : [1, 0, 2, 4]);
  });

  it.each(DTYPES.filter((d) => d !== 'bool'))('arange for %s', (dtype) => {
    const t = Tensor.arange(5, dtype);
    expect(t.dtype).toBe(dtype);
    expect([...t.data]).toEqual([0, 1, 2, 3, 4].map((v) => word(dtype, v)));
    expect(t.toArray()).toEqual([0, 1, 2, 3, 4]);
  });

  it('arange picks int64 for an integral end, as torch does, and float32 for a fractional one', () => {
    const ints = Tensor.arange(4);
    expect(ints.dtype).toBe('int64');
    expect([...ints.data]).toEqual([0n, 1n, 2n, 3n]);
    const floats = Tensor.arange(2.5);
    expect(floats.dtype).toBe('float32');
    expect(floats.toArray()).toEqual([0, 1, 2]);
    expect(Tensor.arange(0).shape).toEqual([0]);
    expect(() => Tensor.arange(300, 'int8')).toThrow(
      /Tensor\.arange: value 299 is not representable as int8/,
    );
    expect(() => Tensor.arange(3, 'bool')).toThrow(TypeError);
    expect(() => Tensor.arange(-1)).toThrow(RangeError);
    expect(() => Tensor.arange(Number.NaN)).toThrow(RangeError);
  });

  it('full infers the dtype from the value; integers refuse values out of range, floats round', () => {
    expect(Tensor.full([1], 2n).dtype).toBe('int64');
    expect(Tensor.full([1], true).dtype).toBe('bool');
    expect(Tensor.full([1], 0.5).dtype).toBe('float32');
    expect([...Tensor.full([1], 2n ** 63n - 1n, 'int64').data]).toEqual([2n ** 63n - 1n]);
    expect([...Tensor.full([1], 7, 'int64').data]).toEqual([7n]);
    expect([...Tensor.full([2], 1.7, 'int32').data]).toEqual([1, 1]);
    expect([...Tensor.full([1], -1.7, 'int32').data]).toEqual([-1]);
    expect([...Tensor.full([1], Number.POSITIVE_INFINITY, 'float16').data]).toEqual([0x7c00]);
    expect([...Tensor.full([1], Number.NaN, 'bool').data]).toEqual([1]);
    expect(() => Tensor.full([2], 300, 'uint8')).toThrow(
      /Tensor\.full: value 300 is not representable as uint8/,
    );
    expect(() => Tensor.full([2], -1, 'uint8')).toThrow(RangeError);
    expect(() => Tensor.full([2], 2n ** 63n, 'int64')).toThrow(RangeError);
    expect(() => Tensor.full([2], Number.NaN, 'int32')).toThrow(RangeError);
    expect(Tensor.full([1], 1e39, 'float32').toArray()).toEqual([Number.POSITIVE_INFINITY]);
    expect([...Tensor.full([1], -70000, 'float16').data]).toEqual([0xfc00]);
    expect(() => Tensor.full([2], 'x' as unknown as number)).toThrow(TypeError);
  });

  it('rounds half-precision writes to nearest even', () => {
    const h = Tensor.fromArray([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65520, 0.1, -0], [5], 'float16');
    expect([...h.data]).toEqual([0x3c00, 0x3c02, 0x7c00, 0x2e66, 0x8000]);
    expect(h.toArray()).toEqual([1, 1.001953125, Number.POSITIVE_INFINITY, 0.0999755859375, -0]);
    const b = Tensor.fromArray([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1], [3], 'bfloat16');
    expect([...b.data]).toEqual([0x3f80, 0x3f82, 0x3f80]);
    expect(Tensor.zeros([2], 'float16').fill_(0.1).data[1]).toBe(0x2e66);
  });

  it('fromArray infers dtypes from typed arrays and copies them', () => {
    const cases: [ArrayLike<number | bigint>, DType][] = [
      [new Float64Array([1.5, 2]), 'float64'],
      [new Float32Array([1.5, 2]), 'float32'],
      [new BigInt64Array([3n, -4n]), 'int64'],
      [new Int32Array([3, -4]), 'int32'],
      [new Int16Array([3, -4]), 'int16'],
      [new Int8Array([3, -4]), 'int8'],
      [new Uint8Array([3, 250]), 'uint8'],
    ];
    for (const [values, dtype] of cases) {
      const t = Tensor.fromArray(values as Float32Array);
      expect(t.dtype).toBe(dtype);
      expect([...t.data]).toEqual([...(values as Float32Array)]);
      expect(t.isShared()).toBe(true);
    }
    const source = new Float32Array([0, 1, 2, 3]);
    const t = Tensor.fromArray(source.subarray(1, 3));
    source[1] = 99;
    expect(t.toArray()).toEqual([1, 2]);
    expect(Tensor.fromArray(new Float32Array(6), [2, -1]).shape).toEqual([2, 3]);
  });

  it('fromArray converts a typed array to a requested dtype, and reads a Uint16Array as raw half words', () => {
    expect([...Tensor.fromArray(new Float32Array([1.5, -2]), undefined, 'float16').data]).toEqual([
      0x3e00, 0xc000,
    ]);
    expect([...Tensor.fromArray(new Int32Array([1, 0, -3]), [3], 'bool').data]).toEqual([1, 0, 1]);
    const raw = Tensor.fromArray(new Uint16Array([0x3c00, 0x4000]), [2], 'float16');
    expect(raw.toArray()).toEqual([1, 2]);
    expect(Tensor.fromArray(new Uint16Array([0x3f80]), [1], 'bfloat16').toArray()).toEqual([1]);
    expect(() => Tensor.fromArray(new Uint16Array([1]))).toThrow(/Uint16Array.*'float16' or 'bfloat16'/);
    expect(() => Tensor.fromArray(new Uint16Array([1]), [1], 'int32')).toThrow(TypeError);
    expect(() => Tensor.fromArray(new Uint32Array([1]) as unknown as Int32Array)).toThrow(/got Uint32Array/);
    expect(() => Tensor.fromArray('abc' as unknown as number[])).toThrow(TypeError);
  });

  it('fromArray encodes plain arrays and names the bad element', () => {
    expect(Tensor.fromArray([1, 2]).dtype).toBe('float32');
    const big = Tensor.fromArray([2n ** 40n, -1n]);
    expect(big.dtype).toBe('int64');
    expect([...big.data]).toEqual([2n ** 40n, -1n]);
    const flags = Tensor.fromArray([true, false]);
    expect(flags.dtype).toBe('bool');
    expect([...flags.data]).toEqual([1, 0]);
    expect([...Tensor.fromArray([1, 2], [2], 'int64').data]).toEqual([1n, 2n]);
    expect(Tensor.fromArray([5], []).shape).toEqual([]);
    expect(() => Tensor.fromArray([1, 300], [2], 'uint8')).toThrow(
      /values\[1\] 300 is not representable as uint8/,
    );
    expect(() => Tensor.fromArray([1, 'a' as unknown as number])).toThrow(/values\[1\] must be a number/);
    expect(() => Tensor.fromArray([1, 2, 3], [4])).toThrow(/shape \[4\] does not hold exactly 3 elements/);
    expect(() => Tensor.fromArray([1, 2, 3], [2, -1])).toThrow(RangeError);
  });

  it('validates shapes, dtypes and devices', () => {
    expect(Tensor.zeros(4).shape).toEqual([4]);
    const scalar = Tensor.zeros([]);
    expect(scalar.numel).toBe(1);
    expect(scalar.describe()).toBe('float32[]');
    expect(Tensor.zeros([0, 3]).numel).toBe(0);
    expect(() => Tensor.zeros([2, -1])).toThrow(/Tensor\.zeros: shape\[1\] must be non-negative/);
    expect(() => Tensor.ones([1.5])).toThrow(/Tensor\.ones: shape\[0\] must be a non-negative integer/);
    expect(() => Tensor.empty('3' as unknown as number[])).toThrow(TypeError);
    expect(() => Tensor.empty([2], 'float8' as DType)).toThrow(/unknown dtype "float8"/);
    expect(() => Tensor.empty([2], 'float32', { device: 'cuda:0' })).toThrow(/GPU backend.*not available/);
    expect(() => Tensor.empty([2], 'float32', { device: 'tpu' as 'cpu' })).toThrow(TypeError);
  });

  it('refuses tensors past the typed array limits quickly, without allocating', () => {
    const started = Date.now();
    expect(() => Tensor.zeros([2 ** 32 + 1], 'uint8')).toThrow(
      /Tensor\.zeros: uint8\[4294967297\] has 4294967297 elements/,
    );
    expect(() => Tensor.full([2 ** 32 + 1], 1, 'uint8')).toThrow(RangeError);
    expect(() => Tensor.empty([2 ** 16, 2 ** 16, 2], 'int8')).toThrow(RangeError);
    expect(() => Tensor.arange(2 ** 33, 'float64')).toThrow(RangeError);
    const tooManyBytes = Math.floor(constants.MAX_LENGTH / 8) + 1;
    expect(() => Tensor.empty([tooManyBytes], 'float64')).toThrow(new RegExp(`float64\\[${tooManyBytes}\\]`));
    expect(() => Tensor.fromBuffer(new ArrayBuffer(4), 0, [2 ** 33], 'float32', [0])).toThrow(RangeError);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('fromBuffer', () => {
  it('views existing memory without copying', () => {
    const buffer = new ArrayBuffer(32);
    const floats = new Float32Array(buffer);
    floats.set([0, 1, 2, 3, 4, 5, 6, 7]);
    const t = Tensor.fromBuffer(buffer, 8, [2, 3], 'float32');
    expect(t.toArray()).toEqual([2, 3, 4, 5, 6, 7]);
    expect(t.isShared()).toBe(false);
    floats[2] = 42;
    expect(t.data[0]).toBe(42);
    expect(Tensor.fromBuffer(new SharedArrayBuffer(8), 0, [2], 'float32').isShared()).toBe(true);
    const broadcast = Tensor.fromBuffer(buffer, 12, [3], 'float32', [0]);
    expect(broadcast.toArray()).toEqual([3, 3, 3]);
    expect(Tensor.fromBuffer(buffer, 32, [0], 'float32').numel).toBe(0);
  });

  it('checks alignment, bounds and arguments', () => {
    const buffer = new ArrayBuffer(16);
    expect(() => Tensor.fromBuffer(buffer, 2, [1], 'float32')).toThrow(
      /byteOffset 2 is not a multiple of the float32 item size 4/,
    );
    expect(() => Tensor.fromBuffer(buffer, 4, [4], 'float32')).toThrow(
      /reaches byte 20, past the end of the 16-byte/,
    );
    expect(() => Tensor.fromBuffer(buffer, 0, [2], 'float32', [5])).toThrow(/reaches byte 24/);
    expect(() => Tensor.fromBuffer(buffer, 20, [0], 'float32')).toThrow(RangeError);
    expect(() => Tensor.fromBuffer(buffer, 0, [2, 2], 'float32', [2])).toThrow(
      /strides \[2\] do not match shape/,
    );
    expect(() => Tensor.fromBuffer(buffer, 0, [2], 'float32', [-1])).toThrow(
      /strides\[0\] must be non-negative/,
    );
    expect(() => Tensor.fromBuffer(buffer, -4, [1], 'float32')).toThrow(RangeError);
    expect(() => Tensor.fromBuffer(new Uint8Array(4) as unknown as ArrayBuffer, 0, [1], 'uint8')).toThrow(
      TypeError,
    );
    expect(() => Tensor.fromBuffer(buffer, 0, [1], 'half' as DType)).toThrow(TypeError);
    expect(Tensor.fromBuffer(buffer, 0, [2, 2], 'float32').strides).toEqual([2, 1]);
  });
});

describe('views and contiguity', () => {
  it('transpose swaps strides and shares memory; contiguous() copies in order', () => {
    const a = matrix();
    const t = a.transpose(0, 1);
    expect(t.shape).toEqual([4, 3]);
    expect(t.strides).toEqual([1, 4]);
    expect(t.buffer).toBe(a.buffer);
    expect(t.isContiguous()).toBe(false);
    expect(t.toArray()).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    const c = t.contiguous();
    expect(c.buffer).not.toBe(a.buffer);
    expect(c.strides).toEqual([3, 1]);
    expect([...c.data]).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    expect(a.contiguous()).toBe(a);
    expect(a.transpose(-1, -2).strides).toEqual([1, 4]);
    expect(() => a.transpose(0, 2)).toThrow(/Tensor\.transpose: dim1 2 is out of range/);
  });

  it('narrow offsets into the same buffer', () => {
    const a = matrix();
    const cols = a.narrow(1, 1, 2);
    expect(cols.shape).toEqual([3, 2]);
    expect(cols.strides).toEqual([4, 1]);
    expect(cols.byteOffset).toBe(4);
    expect(cols.isContiguous()).toBe(false);
    expect(cols.toArray()).toEqual([1, 2, 5, 6, 9, 10]);
    const rows = a.narrow(0, 1, 2);
    expect(rows.isContiguous()).toBe(true);
    expect(rows.byteOffset).toBe(16);
    rows.data[0] = -4;
    expect(a.toArray()[4]).toBe(-4);
    expect(a.narrow(-1, -2, 2).toArray()).toEqual([2, 3, 6, 7, 10, 11]);
    expect(a.narrow(1, 4, 0).shape).toEqual([3, 0]);
    expect(() => a.narrow(1, 3, 2)).toThrow('Tensor.narrow: start 3 + length 2 exceeds size 4 of dim 1');
    expect(() => a.narrow(2, 0, 1)).toThrow(/Tensor\.narrow: dim 2 is out of range/);
    expect(() => a.narrow(0, 0, -1)).toThrow(/length must be non-negative/);
    expect(() => a.narrow(0, 1.5, 1)).toThrow(TypeError);
    expect(() => a.narrow(0, -4, 1)).toThrow(RangeError);
    expect(() => Tensor.zeros([]).narrow(0, 0, 1)).toThrow(/0-dim tensor/);
  });

  it('treats size-1 dims and empty tensors as contiguous', () => {
    const t = Tensor.fromBuffer(new ArrayBuffer(16), 0, [1, 4], 'float32', [100, 1]);
    expect(t.isContiguous()).toBe(true);
    expect(Tensor.zeros([0, 3]).transpose(0, 1).isContiguous()).toBe(true);
    expect(matrix().narrow(1, 1, 1).transpose(0, 1).isContiguous()).toBe(false);
    expect(matrix().narrow(0, 1, 1).transpose(0, 1).isContiguous()).toBe(true);
  });

  it('reshape views contiguous tensors only', () => {
    const a = Tensor.arange(12, 'float32');
    const r = a.reshape([-1, 2]);
    expect(r.shape).toEqual([6, 2]);
    expect(r.strides).toEqual([2, 1]);
    expect(r.buffer).toBe(a.buffer);
    expect(a.reshape(12).shape).toEqual([12]);
    expect(a.narrow(0, 2, 4).reshape([2, 2]).toArray()).toEqual([2, 3, 4, 5]);
    expect(() => a.reshape([5, -1])).toThrow(/cannot infer the -1/);
    expect(() => a.reshape([-1, -1])).toThrow(/only one dimension/);
    expect(() => a.reshape([5, 2])).toThrow(/does not hold exactly 12 elements/);
    expect(() => Tensor.zeros([0]).reshape([-1, 0])).toThrow(RangeError);
    expect(() => matrix().transpose(0, 1).reshape([12])).toThrow(
      /Tensor\.reshape: float32\[4,3\] with strides \[1,4\] is not contiguous; call \.contiguous\(\) first/,
    );
  });

  it('data and bytes require a contiguous tensor', () => {
    const t = matrix().transpose(0, 1);
    expect(() => t.data).toThrow(TypeError);
    expect(() => t.data).toThrow(/Tensor\.data: .*\.contiguous\(\)/);
    expect(() => t.bytes()).toThrow(/Tensor\.bytes: .*\.contiguous\(\)/);
    const one = Tensor.fromArray([1, 2], [2], 'float32');
    expect([...one.bytes()]).toEqual([0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
    const rows = matrix().narrow(0, 2, 1);
    expect(rows.bytes().byteOffset).toBe(32);
    expect(rows.bytes().length).toBe(16);
    expect(rows.data.length).toBe(4);
  });

  it('describes itself', () => {
    expect(Tensor.zeros([4, 8]).describe()).toBe('float32[4,8]');
    expect(String(Tensor.arange(3, 'float32'))).toBe('Tensor(float32[3], [0, 1, 2])');
    expect(Tensor.arange(10).toString()).toBe('Tensor(int64[10], [0, 1, 2, 3, 4, 5, 6, 7, … 2 more])');
    expect(Tensor.full([1], 2n ** 60n).toString()).toBe(`Tensor(int64[1], [${2n ** 60n}])`);
    expect(matrix().transpose(0, 1).toString()).toBe(
      'Tensor(float32[4,3], [0, 4, 8, 1, 5, 9, 2, 6, … 4 more])',
    );
  });
});

describe('copy_, fill_, clone, to', () => {
  it('converts between dtypes', () => {
    const src = Tensor.fromArray([1, 65520, 1 + 2 ** -11, -2.5]);
    expect([...Tensor.zeros([4], 'float16').copy_(src).data]).toEqual([0x3c00, 0x7c00, 0x3c00, 0xc100]);
    expect([...Tensor.zeros([4], 'bfloat16').copy_(src).data]).toEqual([0x3f80, 0x4780, 0x3f80, 0xc020]);
    expect(
      Tensor.zeros([1], 'float32')
        .copy_(Tensor.fromArray(new Uint16Array([0x3e00]), [1], 'float16'))
        .toArray(),
    ).toEqual([1.5]);
    const floats = Tensor.fromArray([1.7, -1.7, Number.NaN, 2 ** 32 + 5], [4], 'float64');
    expect([...Tensor.zeros([4], 'int32').copy_(floats).data]).toEqual([1, -1, 0, 5]);
    expect([...Tensor.zeros([2], 'uint8').copy_(Tensor.fromArray([-1, 256.5])).data]).toEqual([255, 0]);
    expect([...Tensor.zeros([4], 'bool').copy_(Tensor.fromArray([0, -0, 0.5, Number.NaN])).data]).toEqual([
      0, 0, 1, 1,
    ]);
    const toInt64 = Tensor.zeros([3], 'int64').copy_(
      Tensor.fromArray([1e10 + 0.5, -3.9, Number.POSITIVE_INFINITY], [3], 'float64'),
    );
    expect([...toInt64.data]).toEqual([10000000000n, -3n, 0n]);
    const wide = Tensor.fromArray([2n ** 40n + 7n, -1n, 2n ** 53n + 1n]);
    expect([...Tensor.zeros([3], 'int32').copy_(wide).data]).toEqual([7, -1, 1]);
    expect([...Tensor.zeros([3], 'int8').copy_(wide).data]).toEqual([7, -1, 1]);
    expect([...Tensor.zeros([3], 'float64').copy_(wide).data]).toEqual([2 ** 40 + 7, -1, 2 ** 53]);
    expect([...Tensor.zeros([2], 'float32').copy_(Tensor.fromArray([true, false])).data]).toEqual([1, 0]);
    expect([...Tensor.zeros([1], 'float16').copy_(Tensor.fromArray([1.5], [1], 'bfloat16')).data]).toEqual([
      0x3e00,
    ]);
    expect([...Tensor.zeros([2], 'int64').copy_(Tensor.fromArray([3, 0], [2], 'bool')).data]).toEqual([
      1n,
      0n,
    ]);
  });

  it('copies between non-contiguous source and destination', () => {
    const base = Tensor.zeros([4, 3]);
    const dst = base.transpose(0, 1);
    expect(dst.copy_(matrix())).toBe(dst);
    expect([...base.data]).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);

    const padded = Tensor.zeros([3, 4], 'int16');
    padded.narrow(1, 1, 2).copy_(matrix().transpose(0, 1).narrow(0, 1, 2).transpose(0, 1));
    expect(padded.toArray()).toEqual([0, 1, 2, 0, 0, 5, 6, 0, 0, 9, 10, 0]);

    expect(() => Tensor.zeros([3, 4]).copy_(Tensor.zeros([4, 3]))).toThrow(
      /Tensor\.copy_: source float32\[4,3\] does not match the shape of destination float32\[3,4\]/,
    );
    expect(() => Tensor.zeros([1]).copy_([1] as unknown as Tensor)).toThrow(TypeError);
  });

  it('copies correctly when source and destination share memory', () => {
    const a = Tensor.arange(9, 'float32').reshape([3, 3]);
    a.copy_(a.transpose(0, 1));
    expect(a.toArray()).toEqual([0, 3, 6, 1, 4, 7, 2, 5, 8]);
    const b = Tensor.arange(6, 'float32');
    b.narrow(0, 1, 5).copy_(b.narrow(0, 0, 5));
    expect(b.toArray()).toEqual([0, 0, 1, 2, 3, 4]);
  });

  it('fills any layout and returns this', () => {
    const base = Tensor.zeros([3, 4]);
    const column = base.transpose(0, 1).narrow(1, 1, 1);
    expect(column.fill_(7)).toBe(column);
    expect(base.toArray()).toEqual([0, 0, 0, 0, 7, 7, 7, 7, 0, 0, 0, 0]);
    expect([...Tensor.zeros([2], 'int64').fill_(5n).data]).toEqual([5n, 5n]);
    expect([...Tensor.zeros([2], 'int64').fill_(5).data]).toEqual([5n, 5n]);
    expect([...Tensor.zeros([2], 'bool').fill_(true).data]).toEqual([1, 1]);
    expect(Tensor.zeros([0]).fill_(1).numel).toBe(0);
    expect(() => Tensor.zeros([2], 'int8').fill_(128)).toThrow(
      /Tensor\.fill_: value 128 is not representable as int8/,
    );
    expect(() => Tensor.zeros([2]).fill_('1' as unknown as number)).toThrow(TypeError);
  });

  it('clone copies into fresh shared storage', () => {
    const a = matrix().narrow(1, 0, 2);
    const c = a.clone();
    expect(c.buffer).not.toBe(a.buffer);
    expect(c.isShared()).toBe(true);
    expect(c.toArray()).toEqual([0, 1, 4, 5, 8, 9]);
    c.fill_(0);
    expect(a.toArray()).toEqual([0, 1, 4, 5, 8, 9]);
    const viewOfPlain = Tensor.fromBuffer(new ArrayBuffer(8), 0, [2], 'int32');
    expect(viewOfPlain.clone().isShared()).toBe(true);
  });

  it('to(cpu) is a no-op and CUDA needs the GPU backend', () => {
    const t = Tensor.zeros([2]);
    expect(t.to('cpu')).toBe(t);
    expect(() => t.to('cuda:0')).toThrow(/Tensor\.to: device 'cuda:0' needs the GPU backend/);
    expect(() => t.to('gpu' as 'cpu')).toThrow(TypeError);
  });
});

describe('cat, chunk, split', () => {
  it('concatenates along any dim', () => {
    const a = Tensor.fromArray([1, 2], [1, 2]);
    const b = Tensor.fromArray([3, 4, 5, 6], [2, 2]);
    const rows = Tensor.cat([a, b]);
    expect(rows.shape).toEqual([3, 2]);
    expect(rows.toArray()).toEqual([1, 2, 3, 4, 5, 6]);
    const left = Tensor.fromArray([1, 2], [2, 1]);
    const cols = Tensor.cat([left, b], -1);
    expect(cols.shape).toEqual([2, 3]);
    expect(cols.toArray()).toEqual([1, 3, 4, 2, 5, 6]);
    expect(Tensor.cat([b.transpose(0, 1), Tensor.zeros([0, 2]), left.transpose(0, 1)]).toArray()).toEqual([
      3, 5, 4, 6, 1, 2,
    ]);
    expect(Tensor.cat([a]).buffer).not.toBe(a.buffer);
    expect(() => Tensor.cat([])).toThrow(TypeError);
    expect(() => Tensor.cat([a, Tensor.zeros([1, 2], 'float64')])).toThrow(
      /tensors\[1\] float64\[1,2\] has a different dtype/,
    );
    expect(() => Tensor.cat([a, Tensor.zeros([1, 3])])).toThrow(
      /tensors\[1\] float32\[1,3\] does not match .* outside dim 0/,
    );
    expect(() => Tensor.cat([a, Tensor.zeros([2])])).toThrow(RangeError);
    expect(() => Tensor.cat([a, {} as Tensor])).toThrow(/tensors\[1\] must be a Tensor/);
  });

  it('chunk uses ceil(size / chunks) per piece, like torch', () => {
    const five = Tensor.arange(5, 'float32');
    expect(five.chunk(2).map((t) => t.toArray())).toEqual([
      [0, 1, 2],
      [3, 4],
    ]);
    expect(five.chunk(4).map((t) => t.toArray())).toEqual([[0, 1], [2, 3], [4]]);
    expect(
      Tensor.arange(6)
        .chunk(4)
        .map((t) => t.shape[0]),
    ).toEqual([2, 2, 2]);
    expect(five.chunk(9).length).toBe(5);
    const empty = Tensor.zeros([0, 2]).chunk(3);
    expect(empty.map((t) => t.shape)).toEqual([
      [0, 2],
      [0, 2],
      [0, 2],
    ]);
    const pieces = matrix().chunk(2, 1);
    expect(pieces.map((t) => t.toArray())).toEqual([
      [0, 1, 4, 5, 8, 9],
      [2, 3, 6, 7, 10, 11],
    ]);
    expect(pieces[1].buffer).toBe(pieces[0].buffer);
    expect(pieces[1].byteOffset).toBe(8);
    expect(() => five.chunk(0)).toThrow(/chunks must be a positive integer/);
    expect(() => Tensor.zeros([]).chunk(1)).toThrow(RangeError);
  });

  it('split by size or by a list of sizes', () => {
    const five = Tensor.arange(5, 'float32');
    expect(five.split(2).map((t) => t.toArray())).toEqual([[0, 1], [2, 3], [4]]);
    expect(five.split(5).length).toBe(1);
    expect(five.split([1, 4]).map((t) => t.toArray())).toEqual([[0], [1, 2, 3, 4]]);
    const trailing = five.split([2, 3, 0]);
    expect(trailing.map((t) => t.shape)).toEqual([[2], [3], [0]]);
    expect(trailing[2].toArray()).toEqual([]);
    expect(
      Tensor.zeros([0])
        .split(2)
        .map((t) => t.shape),
    ).toEqual([[0]]);
    expect(Tensor.zeros([0]).split(0).length).toBe(1);
    expect(matrix().split([3, 1], -1)[1].toArray()).toEqual([3, 7, 11]);
    expect(() => five.split([2, 2])).toThrow(/sizes \[2,2\] sum to 4, but dim 0 has size 5/);
    expect(() => five.split(0)).toThrow(/split size 0 is only valid for an empty dim/);
    expect(() => five.split([2, -1, 4])).toThrow(RangeError);
  });
});

describe('equal, allclose, toArray', () => {
  it('equal compares shape, dtype and values', () => {
    const a = matrix();
    expect(a.equal(Tensor.fromArray([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [3, 4]))).toBe(true);
    expect(a.transpose(0, 1).equal(a.transpose(0, 1).contiguous())).toBe(true);
    expect(a.equal(a.transpose(0, 1).contiguous().transpose(0, 1))).toBe(true);
    expect(a.equal(a.reshape([4, 3]))).toBe(false);
    expect(a.equal(a.clone().fill_(0))).toBe(false);
    expect(Tensor.arange(3).equal(Tensor.arange(3, 'float32'))).toBe(false);
    expect(Tensor.fromArray([Number.NaN]).equal(Tensor.fromArray([Number.NaN]))).toBe(false);
    expect(
      Tensor.fromArray([Number.NaN], [1], 'float16').equal(Tensor.fromArray([Number.NaN], [1], 'float16')),
    ).toBe(false);
    expect(Tensor.fromArray([-0], [1], 'float16').equal(Tensor.fromArray([0], [1], 'float16'))).toBe(true);
    expect(Tensor.fromArray([2n ** 60n]).equal(Tensor.fromArray([2n ** 60n + 1n]))).toBe(false);
    expect(Tensor.zeros([0]).equal(Tensor.zeros([0]))).toBe(true);
    expect(() => a.equal(null as unknown as Tensor)).toThrow(TypeError);
  });

  it('allclose follows torch tolerances', () => {
    const a = Tensor.fromArray([1, 2, 1000]);
    expect(a.allclose(Tensor.fromArray([1 + 1e-6, 2, 1000.005]))).toBe(true);
    expect(a.allclose(Tensor.fromArray([1.001, 2, 1000]))).toBe(false);
    expect(a.allclose(Tensor.fromArray([1.001, 2, 1000]), { rtol: 1e-2 })).toBe(true);
    expect(Tensor.fromArray([0]).allclose(Tensor.fromArray([1e-3]), { atol: 1e-2 })).toBe(true);
    const inf = Number.POSITIVE_INFINITY;
    expect(Tensor.fromArray([inf, -inf]).allclose(Tensor.fromArray([inf, -inf]))).toBe(true);
    expect(Tensor.fromArray([inf]).allclose(Tensor.fromArray([-inf]))).toBe(false);
    expect(Tensor.fromArray([1]).allclose(Tensor.fromArray([inf]), { rtol: 1 })).toBe(false);
    expect(Tensor.fromArray([Number.NaN]).allclose(Tensor.fromArray([Number.NaN]))).toBe(false);
    expect(Tensor.fromArray([0.1], [1], 'float16').allclose(Tensor.fromArray([0.1]), { rtol: 1e-3 })).toBe(
      true,
    );
    expect(Tensor.fromArray([0.1], [1], 'float16').allclose(Tensor.fromArray([0.1]))).toBe(false);
    expect(matrix().transpose(0, 1).allclose(matrix().transpose(0, 1).contiguous())).toBe(true);
    expect(() => a.allclose(Tensor.zeros([2]))).toThrow(/shapes differ: float32\[3\] vs float32\[2\]/);
    expect(() => a.allclose(a, { rtol: -1 })).toThrow(/rtol must be a non-negative number/);
  });

  it('toArray decodes to plain numbers in row-major order', () => {
    expect(Tensor.fromArray(new Uint16Array([0x3c00, 0xc000, 0x7e00]), [3], 'float16').toArray()).toEqual([
      1,
      -2,
      Number.NaN,
    ]);
    expect(Tensor.fromArray(new Uint16Array([0x4049]), [1], 'bfloat16').toArray()).toEqual([3.140625]);
    expect(Tensor.fromArray([true, false]).toArray()).toEqual([1, 0]);
    expect(Tensor.fromArray([-(2n ** 53n) + 1n, 5n]).toArray()).toEqual([-(2 ** 53) + 1, 5]);
    expect(() => Tensor.fromArray([1n, 2n ** 53n]).toArray()).toThrow(
      /int64 element 9007199254740992 at index 1/,
    );
    expect(Tensor.zeros([2, 0]).toArray()).toEqual([]);
    expect(Tensor.full([], 4).toArray()).toEqual([4]);
  });
});
