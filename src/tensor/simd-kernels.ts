/**
 * reduceArrays' WebAssembly SIMD path.
 *
 * Why: V8 does not vectorize JavaScript loops, and even unrolled they run at
 * a quarter of memory-copy bandwidth; the float16/bfloat16 conversions are
 * worse still. Wasm cannot operate on the caller's ArrayBuffers, so each
 * block of each input is copied into a small wasm memory (memcpy speed,
 * in cache), folded there 16 bytes at a time, and the result copied out.
 *
 * Assembling the module costs far more than compiling it: a process
 * assembles it once, and its rank threads instantiate the compiled
 * module their launcher hands them (adoptKernelModule), since a
 * WebAssembly.Module crosses to a worker whole.
 */
import { arrayConstructor, type DType, type TypedArray } from './dtype.ts';
import type { FoldOp } from './reduce-loops.ts';
import { copyInto } from './shared-copy.ts';
import {
  CONVERTS,
  type ConvertName,
  type Float32Fold,
  FOLDS,
  type FoldName,
  reduceModule,
  type WasmConvert,
  type WasmFold,
} from './simd-module.ts';

/** Bytes of one block of sums, one wasm page: it stays in cache, and the calls per block do not show. */
const REGION = 65536;
/** Wasm memory layout: the running sums, the next input, and 16-bit float words on their way in or out. */
const SUMS = 0;
const OPERAND = REGION;
const WORDS = 2 * REGION;
const PAGES = 3;

/** Called on each block of sums (in the class they are accumulated in) before it is stored: avg divides. */
export type BlockFinish = (sums: TypedArray) => void;

/** Reduces `inputs` into `out` as reduceArrays does. */
export type SimdReduce = (
  out: TypedArray,
  inputs: readonly TypedArray[],
  finish: BlockFinish | undefined,
) => void;

interface Kernels {
  /** All of wasm memory; it cannot grow, so this view stays valid. */
  readonly heap: Uint8Array;
  readonly folds: Readonly<Record<FoldName, WasmFold>>;
  readonly converts: Readonly<Record<ConvertName, WasmConvert>>;
}

/** The part of the WebAssembly JS API used here; TypeScript's libs without the DOM do not declare it. */
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { readonly exports: Record<string, unknown> };
}

const wasmApi = () => (globalThis as { WebAssembly?: WasmApi }).WebAssembly;

type Folds = Readonly<Partial<Record<FoldOp, FoldName>>>;

// Bitwise ops are blind to lane width, so one set serves every integer dtype and bool (whose ops
// reduceArrays has already mapped onto these).
const BITWISE: Folds = { band: 'v128_and', bor: 'v128_or', bxor: 'v128_xor' };
const FLOAT32: Folds = { sum: 'f32_add', prod: 'f32_mul', min: 'f32_min', max: 'f32_max' };

/**
 * The fold for each (dtype, op) that has one. Integer adds and multiplies wrap in wasm exactly as stores
 * into the typed array do; float lanes round to nearest like the JS path's stores; f32x4/f64x2 min/max
 * propagate NaN and order -0 below +0 exactly as Math.min/Math.max. Missing pairs run on the JS loops:
 * int8 prod (wasm has no i8x16.mul), and all of int64, whose BigInt64Array loops V8 already compiles to
 * native 64-bit operations, which keep pace with the wasm path once that pays for its copies.
 */
const BY_DTYPE: Readonly<Record<DType, Folds>> = {
  float64: { sum: 'f64_add', prod: 'f64_mul', min: 'f64_min', max: 'f64_max' },
  float32: FLOAT32,
  // Halves are folded as float32.
  float16: FLOAT32,
  bfloat16: FLOAT32,
  int64: {},
  int32: { ...BITWISE, sum: 'i32_add', prod: 'i32_mul', min: 'i32_min_s', max: 'i32_max_s' },
  int16: { ...BITWISE, sum: 'i16_add', prod: 'i16_mul', min: 'i16_min_s', max: 'i16_max_s' },
  int8: { ...BITWISE, sum: 'i8_add', min: 'i8_min_s', max: 'i8_max_s' },
  uint8: { ...BITWISE, sum: 'i8_add', min: 'i8_min_u', max: 'i8_max_u' },
  bool: BITWISE,
};

/**
 * A new instance of the kernel module with `pages` 64 KiB pages of memory: its exports, memory and the
 * functions reduceModule lists. Null where the module does not validate, which is how a runtime without
 * SIMD (or without WebAssembly, as under --jitless) shows.
 */
export function instantiateKernels(pages: number): Readonly<Record<string, unknown>> | null {
  const module = compile(reduceModule(pages));
  return module === null ? null : instantiate(module);
}

function compile(bytes: Uint8Array): object | null {
  const wasm = wasmApi();
  return wasm === undefined || !wasm.validate(bytes) ? null : new wasm.Module(bytes);
}

function instantiate(module: object): Readonly<Record<string, unknown>> {
  // Not `new (wasmApi() as WasmApi).Instance(…)`: tsc 7 drops those parentheses, and `new` then calls wasmApi.
  const wasm = wasmApi() as WasmApi;
  return new wasm.Instance(module).exports;
}

let compiled: object | null | undefined;

/**
 * The compiled kernel module, for this thread and for threads it starts: assembled on first call,
 * unless one was adopted. Null where the runtime has no WebAssembly SIMD.
 */
export function kernelModule(): object | null {
  compiled ??= compile(kernelBytes());
  return compiled;
}

/** Takes the kernel module another thread of this process compiled (kernelModule), unless this one has its own. */
export function adoptKernelModule(module: object | null): void {
  compiled ??= module;
}

/** The kernel module's bytes: what a rank bundle keeps, so that a process need not assemble them again. */
export function kernelBytes(): Uint8Array {
  return reduceModule(PAGES);
}

/** Compiles bytes that kernelBytes() made (in any process, from this code) as this thread's module, unless it has one. */
export function adoptKernelBytes(bytes: Uint8Array): void {
  compiled ??= compile(bytes);
}

let loaded: Kernels | null | undefined;

/** The thread's kernels, instantiated on first call; null where the runtime has no WebAssembly SIMD. */
function kernels(): Kernels | null {
  if (loaded !== undefined) return loaded;
  const module = kernelModule();
  if (module === null) return (loaded = null);
  const exports = instantiate(module);
  const named = <K extends string, F>(names: readonly K[], prefix: string) =>
    Object.fromEntries(names.map((name) => [name, exports[prefix + name] as F])) as Record<K, F>;
  return (loaded = {
    heap: new Uint8Array((exports.memory as { buffer: ArrayBuffer }).buffer),
    folds: named<FoldName, WasmFold>(Object.keys(FOLDS) as FoldName[], 'fold_'),
    converts: named<ConvertName, WasmConvert>(CONVERTS, ''),
  });
}

/** Whether this runtime runs WebAssembly SIMD (instantiating the kernels the first time it is asked). */
export function simdAvailable(): boolean {
  return kernels() !== null;
}

/** The reducers made so far, per dtype and op: every small reduction asks for one. */
const reducers = new Map<DType, Map<FoldOp, SimdReduce | undefined>>();

/** The SIMD reduction for (op, dtype), or undefined where SIMD is missing or has no instruction for it. */
export function simdReducer(op: FoldOp, dtype: DType): SimdReduce | undefined {
  let byOp = reducers.get(dtype);
  if (byOp === undefined) reducers.set(dtype, (byOp = new Map()));
  if (!byOp.has(op)) byOp.set(op, makeSimdReducer(op, dtype));
  return byOp.get(op);
}

function makeSimdReducer(op: FoldOp, dtype: DType): SimdReduce | undefined {
  const k = kernels();
  const name = BY_DTYPE[dtype][op];
  if (k === null || name === undefined) return undefined;
  if (dtype === 'float16' || dtype === 'bfloat16') {
    const half = dtype === 'float16' ? 'f16' : 'bf16';
    const widen = k.converts[`widen_${half}`];
    const widenFold = k.converts[`widen_${half}_${name as Float32Fold}`];
    const narrow = k.converts[`narrow_${half}`];
    const halfSteps: BlockSteps = {
      load: (words) => {
        copyInto(k.heap, words, WORDS);
        widen(SUMS, WORDS, words.length);
      },
      fold: (words) => {
        copyInto(k.heap, words, WORDS);
        widenFold(SUMS, WORDS, words.length);
      },
      store: (bytes) => {
        narrow(WORDS, SUMS, 2 * bytes);
        return WORDS;
      },
    };
    // float32 sums take twice the bytes of the words: a block is half a region of words.
    return (out, inputs, finish) =>
      reduceInBlocks(k.heap, REGION / 2, Float32Array, out, inputs, finish, halfSteps);
  }
  const fold = k.folds[name];
  const Sums = arrayConstructor(dtype);
  const steps: BlockSteps = {
    load: (block) => copyInto(k.heap, block, SUMS),
    fold: (block) => {
      copyInto(k.heap, block, OPERAND);
      fold(SUMS, SUMS, OPERAND, block.length);
    },
    store: () => SUMS,
  };
  return (out, inputs, finish) => reduceInBlocks(k.heap, REGION, Sums, out, inputs, finish, steps);
}

/** How one block travels through wasm memory; sizes are in bytes of the caller's arrays. */
interface BlockSteps {
  /** Puts the first input's block into SUMS, in the lanes the fold works on. */
  load(block: Uint8Array): void;
  /** SUMS = SUMS op a later input's block. */
  fold(block: Uint8Array): void;
  /** Puts `bytes` of results in the caller's format and returns where in wasm memory they are. */
  store(bytes: number): number;
}

/**
 * out = in0 op in1 op in2 ..., folding left to right, `blockBytes` of out at a time. `out` is written only
 * after every input's block has been read, so it may be the same memory as any of the inputs.
 */
function reduceInBlocks(
  heap: Uint8Array,
  blockBytes: number,
  SumsArray: new (buffer: ArrayBuffer, byteOffset: number, length: number) => TypedArray,
  out: TypedArray,
  inputs: readonly TypedArray[],
  finish: BlockFinish | undefined,
  steps: BlockSteps,
): void {
  const dst = bytesOf(out);
  const elementBytes = out.BYTES_PER_ELEMENT;
  for (let start = 0; start < dst.length; start += blockBytes) {
    const end = Math.min(start + blockBytes, dst.length);
    steps.load(blockOf(inputs[0], start, end));
    for (let j = 1; j < inputs.length; j++) steps.fold(blockOf(inputs[j], start, end));
    finish?.(new SumsArray(heap.buffer as ArrayBuffer, SUMS, (end - start) / elementBytes));
    const at = steps.store(end - start);
    copyInto(dst, heap.subarray(at, at + end - start), start);
  }
}

/** Bytes start..end of `x`: all of them, without a second view, for a tensor of one block (every small reduction). */
function blockOf(x: TypedArray, start: number, end: number): Uint8Array {
  const bytes = bytesOf(x);
  return end - start === bytes.length ? bytes : bytes.subarray(start, end);
}

/** The bytes of `x`, whatever its element type: how blocks are copied in and out of wasm memory. */
export function bytesOf(x: TypedArray): Uint8Array {
  return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
}
