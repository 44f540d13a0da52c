/**
 * reduceArrays: the element-wise reduction under every collective (reduce,
 * allReduce, reduceScatter), on raw typed arrays.
 *
 * Work goes in blocks that fit in cache: each block of `out` is folded with
 * the same block of every input before moving on, so `out` is read from and
 * written to memory once, whatever the number of inputs. Where WebAssembly
 * SIMD has the instruction, blocks are folded in wasm (simd-kernels.ts);
 * elsewhere, and where the runtime lacks SIMD, by the JS loops of
 * reduce-loops.ts. Both give the same bits, NaN payloads aside.
 */
import { arrayConstructor, assertDType, type DType, type TypedArray } from './dtype.ts';
import { narrowToHalfWords, widenHalfWords } from './half.ts';
import { divideLoop, type FoldLoop, type FoldOp, foldLoop } from './reduce-loops.ts';
import { assertReduceOp, type ReduceOp } from './reduce-ops.ts';
import { type BlockFinish, bytesOf, simdAvailable, simdReducer } from './simd-kernels.ts';

export { assertReduceOp, isReduceOpDefined, REDUCE_OPS, type ReduceOp } from './reduce-ops.ts';

/** Elements per block: at 8 bytes, out + one input + a saved copy stay well inside L2. */
const BLOCK = 16384;
/** float16/bfloat16 work in float32 scratch, two blocks of this many elements. */
const HALF_BLOCK = 4096;

// Module-level scratch is safe: the loops never call out, so no second reduction can start mid-block.
const savedBlock = new ArrayBuffer(BLOCK * 8);
const halfAcc = new Float32Array(HALF_BLOCK);
const halfTmp = new Float32Array(HALF_BLOCK);
const halfAccBits = new Uint32Array(halfAcc.buffer);
const halfTmpBits = new Uint32Array(halfTmp.buffer);

/**
 * out[i] = op(inputs[0][i], inputs[1][i], ...), folding left to right.
 *
 * `out` may be exactly one (or several) of the inputs — in-place allReduce
 * passes its own slice both ways — but must not partly overlap any of them.
 * float16/bfloat16 accumulate in float32 and round once at the end; integers
 * wrap like their C type; integer avg truncates toward zero; bool reduces
 * logically: sum/max/avg/bor = or, prod/min/band = and, bxor = xor, on the
 * 0/1 bytes Tensor stores (other byte values are not normalized).
 */
export function reduceArrays(
  op: ReduceOp,
  dtype: DType,
  out: TypedArray,
  inputs: readonly TypedArray[],
): void {
  const where = 'reduceArrays';
  assertDType(dtype, where);
  assertReduceOp(op, dtype, where);
  checkOperands(dtype, out, inputs, where);
  reduceCheckedArrays(op, dtype, out, inputs);
}

/**
 * reduceArrays on operands a caller checked once (checkOperands) and keeps
 * for many reductions, with an op it validated for the dtype: the checks
 * cost more than a small reduction itself.
 */
export function reduceCheckedArrays(
  op: ReduceOp,
  dtype: DType,
  out: TypedArray,
  inputs: readonly TypedArray[],
): void {
  // Nothing to reduce (a barrier's contribution): no kernel is needed, or made.
  if (out.length === 0) return;
  if (inputs.length === 1) {
    if (!sameMemory(out, inputs[0])) bytesOf(out).set(bytesOf(inputs[0]));
    return;
  }
  const fold = foldOpFor(op, dtype);
  const half = dtype === 'float16' || dtype === 'bfloat16';
  // Sums are kept in out's class, or in float32 for halves; avg divides each block of them before it is stored.
  const sums = half ? halfAcc : out;
  const divide = op === 'avg' && dtype !== 'bool' ? divideLoop(sums) : undefined;
  const divisor = out instanceof BigInt64Array ? BigInt(inputs.length) : inputs.length;
  const finish: BlockFinish | undefined = divide && ((block) => divide(block, divisor));
  const simd = simdEnabled && (half || out.length > SIMD_MIN) ? simdReducer(fold, dtype) : undefined;
  if (simd !== undefined) {
    simd(out, inputs, finish);
  } else if (half) {
    reduceHalves(
      dtype,
      foldLoop(fold, halfAcc),
      finish,
      out as Uint16Array,
      inputs as readonly Uint16Array[],
    );
  } else {
    foldBlocks(dtype, out, inputs, foldLoop(fold, out), finish);
  }
}

let simdEnabled = true;

/**
 * Lets reduceArrays use the WebAssembly SIMD kernels where they cover the (op, dtype) pair (the default),
 * or keeps it on the JavaScript loops, so tests and benchmarks can run both paths on the same data.
 * Returns whether the SIMD kernels are now in use: false whatever was asked where the runtime lacks
 * WebAssembly SIMD.
 */
export function setSimdKernels(enabled: boolean): boolean {
  simdEnabled = enabled;
  return enabled && simdAvailable();
}

// With 0/1 bytes the bitwise ops are the logical ones and their results stay 0/1.
const BOOL_FOLD: Record<ReduceOp, FoldOp> = {
  sum: 'bor',
  avg: 'bor',
  max: 'bor',
  bor: 'bor',
  prod: 'band',
  min: 'band',
  band: 'band',
  bxor: 'bxor',
};

function foldOpFor(op: ReduceOp, dtype: DType): FoldOp {
  if (dtype === 'bool') return BOOL_FOLD[op];
  return op === 'avg' ? 'sum' : op;
}

/** Throws unless `out` and `inputs` are arrays of dtype's class, of one length, each input `out` itself or disjoint from it. */
export function checkOperands(
  dtype: DType,
  out: TypedArray,
  inputs: readonly TypedArray[],
  where: string,
): void {
  if (inputs.length === 0) throw new RangeError(`${where}: needs at least one input`);
  const array = arrayConstructor(dtype);
  // Called for every small reduction: names are made only for an error.
  for (let j = 0; j <= inputs.length; j++) {
    const x = j === 0 ? out : inputs[j - 1];
    if (!(x instanceof array)) {
      throw new TypeError(
        `${where}: ${operandName(j)} must be a ${array.name} for ${dtype}, got ${describe(x)}`,
      );
    }
    if (x.length !== out.length) {
      throw new RangeError(`${where}: ${operandName(j)} has ${x.length} elements, out has ${out.length}`);
    }
    if (j > 0 && overlaps(out, x) && !sameMemory(out, x)) {
      throw new RangeError(
        `${where}: out partly overlaps ${operandName(j)}; it must be the same memory or disjoint`,
      );
    }
  }
}

function operandName(j: number): string {
  return j === 0 ? 'out' : `inputs[${j - 1}]`;
}

function describe(value: unknown): string {
  if (value === null || typeof value !== 'object') return String(value);
  return value.constructor?.name ?? 'object';
}

function sameMemory(x: TypedArray, y: TypedArray): boolean {
  return x.buffer === y.buffer && x.byteOffset === y.byteOffset && x.byteLength === y.byteLength;
}

function overlaps(x: TypedArray, y: TypedArray): boolean {
  return (
    x.buffer === y.buffer &&
    x.byteOffset < y.byteOffset + y.byteLength &&
    y.byteOffset < x.byteOffset + x.byteLength
  );
}

/**
 * Up to this many elements (halves aside) a reduction runs the JS loops: the
 * SIMD path's fixed cost (calls into wasm, copies in and out of its memory)
 * is more than the loop's whole work.
 */
const SIMD_MIN = 64;

/** Whether an input after the first two is `out` itself, which a fold in place would overwrite before reading. */
function laterInputIsOut(out: TypedArray, inputs: readonly TypedArray[]): boolean {
  for (let j = 2; j < inputs.length; j++) if (sameMemory(inputs[j], out)) return true;
  return false;
}

/** Folds every input into `out` block by block: out = in0 op in1, then out = out op in2, ... */
function foldBlocks(
  dtype: DType,
  out: TypedArray,
  inputs: readonly TypedArray[],
  fold: FoldLoop,
  finish: BlockFinish | undefined,
): void {
  // The first fold reads in0 and in1 at each index before writing it, so only a later input that is `out`
  // itself would see its block already overwritten; those read a copy saved before the first fold.
  const mustSave = laterInputIsOut(out, inputs);
  if (!mustSave && out.length <= BLOCK) {
    // One block: folded in place, without views (every small reduction comes here).
    fold(out, inputs[0], inputs[1]);
    for (let j = 2; j < inputs.length; j++) fold(out, out, inputs[j]);
    finish?.(out);
    return;
  }
  const fromSaved = inputs.map((x, j) => j >= 2 && sameMemory(x, out));
  const ArrayClass = arrayConstructor(dtype);
  for (let start = 0; start < out.length; start += BLOCK) {
    const end = Math.min(start + BLOCK, out.length);
    const acc = out.subarray(start, end);
    let saved: TypedArray | undefined;
    if (mustSave) {
      saved = new ArrayClass(savedBlock, 0, end - start);
      bytesOf(saved).set(bytesOf(acc));
    }
    const block = (j: number) => (fromSaved[j] ? saved! : inputs[j].subarray(start, end));
    fold(acc, block(0), block(1));
    for (let j = 2; j < inputs.length; j++) fold(acc, acc, block(j));
    finish?.(acc);
  }
}

/** float16/bfloat16: decode each block to float32, fold there, round once to 16 bits on the way out. */
function reduceHalves(
  dtype: 'float16' | 'bfloat16',
  fold: FoldLoop,
  finish: BlockFinish | undefined,
  out: Uint16Array,
  inputs: readonly Uint16Array[],
): void {
  const decode = widenHalfWords(dtype);
  const encode = narrowToHalfWords(dtype);
  // `out` is written only after every input's block has been read, so aliasing needs no care here.
  for (let start = 0; start < out.length; start += HALF_BLOCK) {
    const end = Math.min(start + HALF_BLOCK, out.length);
    const acc = halfAcc.subarray(0, end - start);
    const tmp = halfTmp.subarray(0, end - start);
    decode(halfAccBits, inputs[0].subarray(start, end));
    for (let j = 1; j < inputs.length; j++) {
      decode(halfTmpBits, inputs[j].subarray(start, end));
      fold(acc, acc, tmp);
    }
    finish?.(acc);
    encode(out.subarray(start, end), halfAccBits);
  }
}
