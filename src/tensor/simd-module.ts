/**
 * The WebAssembly module behind the SIMD reduce path, assembled byte by byte.
 *
 * It is small enough that a toolchain (and a checked-in .wasm blob nobody can
 * review) would cost more than this encoder: a few binary-format helpers, the
 * opcodes it uses by name, and each kernel written as nested expressions that
 * read like the WebAssembly text format. Byte layouts follow the WebAssembly
 * core spec (binary format) and the fixed-width SIMD proposal it absorbed.
 *
 * Every kernel walks its regions a whole loop iteration at a time (64 bytes
 * for the folds, 16 or 32 bytes of source for the conversions), rounding the
 * byte count up, so callers keep each region a multiple of 64 bytes: the
 * lanes past the data are computed on whatever is there and never read back.
 */

/** A fold kernel: dst = a op b, lane-wise over `bytes` bytes of wasm memory (bytes > 0). */
export type WasmFold = (dst: number, a: number, b: number, bytes: number) => void;

/** A conversion kernel between float32 bits and 16-bit float words; `bytes` counts the source (> 0). */
export type WasmConvert = (dst: number, src: number, bytes: number) => void;

// --- Binary encoding -------------------------------------------------------------------------------

type Bytes = number[];

/** Unsigned LEB128: seven bits per byte, low first, high bit set on all but the last. */
function uleb(value: number): Bytes {
  const out: Bytes = [];
  do {
    const low = value & 0x7f;
    value >>>= 7;
    out.push(value === 0 ? low : low | 0x80);
  } while (value !== 0);
  return out;
}

/** Signed LEB128 of an int32 (i32.const immediates): stops once the rest is all sign bits. */
function sleb(value: number): Bytes {
  const out: Bytes = [];
  value |= 0;
  for (;;) {
    const low = value & 0x7f;
    value >>= 7;
    const done = (value === 0 && (low & 0x40) === 0) || (value === -1 && (low & 0x40) !== 0);
    out.push(done ? low : low | 0x80);
    if (done) return out;
  }
}

/** A vector: element count, then the elements. */
function vec(items: readonly Bytes[]): Bytes {
  const out = uleb(items.length);
  for (const item of items) out.push(...item);
  return out;
}

function utf8(text: string): Bytes {
  const bytes = new TextEncoder().encode(text);
  return [...uleb(bytes.length), ...bytes];
}

function section(id: number, items: readonly Bytes[]): Bytes {
  const payload = vec(items);
  return [id, ...uleb(payload.length), ...payload];
}

const SECTION = { type: 1, function: 3, memory: 5, export: 7, code: 10 } as const;
const TYPE = { func: 0x60, i32: 0x7f, v128: 0x7b } as const;
const EXPORT = { func: 0x00, memory: 0x02 } as const;

// --- Instructions ----------------------------------------------------------------------------------

const OP = {
  loop: 0x03,
  end: 0x0b,
  brIf: 0x0d,
  localGet: 0x20,
  localSet: 0x21,
  i32Const: 0x41,
  i32LtU: 0x49,
  i32Add: 0x6a,
  /** Prefix of every SIMD instruction; the SIMD opcode follows as a LEB128. */
  simd: 0xfd,
} as const;

/** No block result: the loops leave nothing on the stack. */
const EMPTY_BLOCK = 0x40;

/** SIMD opcodes (after the 0xfd prefix). */
const SIMD = {
  v128Load: 0x00,
  v128Store: 0x0b,
  i32x4Splat: 0x11,
  i32x4LtS: 0x39,
  i32x4GtS: 0x3b,
  v128And: 0x4e,
  v128Or: 0x50,
  v128Xor: 0x51,
  v128Bitselect: 0x52,
  i8x16Add: 0x6e,
  i8x16MinS: 0x76,
  i8x16MinU: 0x77,
  i8x16MaxS: 0x78,
  i8x16MaxU: 0x79,
  i16x8NarrowI32x4U: 0x86,
  i16x8Add: 0x8e,
  i16x8Mul: 0x95,
  i16x8MinS: 0x96,
  i16x8MaxS: 0x98,
  i32x4ExtendLowI16x8U: 0xa9,
  i32x4ExtendHighI16x8U: 0xaa,
  i32x4Shl: 0xab,
  i32x4ShrU: 0xad,
  i32x4Add: 0xae,
  i32x4Sub: 0xb1,
  i32x4Mul: 0xb5,
  i32x4MinS: 0xb6,
  i32x4MinU: 0xb7,
  i32x4MaxS: 0xb8,
  f32x4Add: 0xe4,
  f32x4Mul: 0xe6,
  f32x4Min: 0xe8,
  f32x4Max: 0xe9,
  f64x2Add: 0xf0,
  f64x2Mul: 0xf2,
  f64x2Min: 0xf4,
  f64x2Max: 0xf5,
  f32x4ConvertI32x4S: 0xfa,
} as const;

type SimdOp = (typeof SIMD)[keyof typeof SIMD];

/** Lane-wise binary instructions the module exports a fold for, by export name (fold_<name>). */
export const FOLDS = {
  f32_add: SIMD.f32x4Add,
  f32_mul: SIMD.f32x4Mul,
  f32_min: SIMD.f32x4Min,
  f32_max: SIMD.f32x4Max,
  f64_add: SIMD.f64x2Add,
  f64_mul: SIMD.f64x2Mul,
  f64_min: SIMD.f64x2Min,
  f64_max: SIMD.f64x2Max,
  i32_add: SIMD.i32x4Add,
  i32_mul: SIMD.i32x4Mul,
  i32_min_s: SIMD.i32x4MinS,
  i32_max_s: SIMD.i32x4MaxS,
  i16_add: SIMD.i16x8Add,
  i16_mul: SIMD.i16x8Mul,
  i16_min_s: SIMD.i16x8MinS,
  i16_max_s: SIMD.i16x8MaxS,
  i8_add: SIMD.i8x16Add,
  i8_min_s: SIMD.i8x16MinS,
  i8_min_u: SIMD.i8x16MinU,
  i8_max_s: SIMD.i8x16MaxS,
  i8_max_u: SIMD.i8x16MaxU,
  v128_and: SIMD.v128And,
  v128_or: SIMD.v128Or,
  v128_xor: SIMD.v128Xor,
} as const satisfies Record<string, SimdOp>;

export type FoldName = keyof typeof FOLDS;

/** The 16-bit float formats, as their kernels' names spell them. */
const HALF_FORMATS = ['f16', 'bf16'] as const;
type HalfFormat = (typeof HALF_FORMATS)[number];

/** The float32 folds, which halves use too. */
const FLOAT32_FOLDS = ['f32_add', 'f32_mul', 'f32_min', 'f32_max'] as const satisfies readonly FoldName[];
export type Float32Fold = (typeof FLOAT32_FOLDS)[number];

/**
 * The conversion kernels, (dst, src, bytes): widen_f16 writes float32 bits, narrow_f16 rounds them back to
 * words, and widen_f16_f32_add (and _mul, _min, _max) folds the widened words straight into the float32
 * at dst: dst = dst + widened src.
 */
export type ConvertName =
  | `widen_${HalfFormat}`
  | `narrow_${HalfFormat}`
  | `widen_${HalfFormat}_${Float32Fold}`;

export const CONVERTS: readonly ConvertName[] = HALF_FORMATS.flatMap((half) => [
  `widen_${half}` as const,
  `narrow_${half}` as const,
  ...FLOAT32_FOLDS.map((fold) => `widen_${half}_${fold}` as const),
]);

// Each helper returns the code that pushes one value, so kernels nest like the text format's folded form.
type Expr = Bytes;

const get = (local: number): Expr => [OP.localGet, local];
const simd = (op: SimdOp, ...immediates: number[]): Bytes => [OP.simd, ...uleb(op), ...immediates];
/** i32x4.splat of a constant: the same 32-bit pattern in every lane (given as uint32 or int32). */
const splat = (value: number): Expr => [OP.i32Const, ...sleb(value), ...simd(SIMD.i32x4Splat)];
const binary =
  (op: SimdOp) =>
  (x: Expr, y: Expr): Expr => [...x, ...y, ...simd(op)];
const shift =
  (op: SimdOp) =>
  (x: Expr, bits: number): Expr => [...x, OP.i32Const, ...sleb(bits), ...simd(op)];
const unary =
  (op: SimdOp) =>
  (x: Expr): Expr => [...x, ...simd(op)];
const bitselect = (ifSet: Expr, ifClear: Expr, mask: Expr): Expr => [
  ...ifSet,
  ...ifClear,
  ...mask,
  ...simd(SIMD.v128Bitselect),
];

const and = binary(SIMD.v128And);
const or = binary(SIMD.v128Or);
const xor = binary(SIMD.v128Xor);
const add = binary(SIMD.i32x4Add);
const sub = binary(SIMD.i32x4Sub);
const ltS = binary(SIMD.i32x4LtS);
const gtS = binary(SIMD.i32x4GtS);
const minU = binary(SIMD.i32x4MinU);
const fadd = binary(SIMD.f32x4Add);
const fmul = binary(SIMD.f32x4Mul);
const convertS = unary(SIMD.f32x4ConvertI32x4S);
const shl = shift(SIMD.i32x4Shl);
const shrU = shift(SIMD.i32x4ShrU);
const extendLow = unary(SIMD.i32x4ExtendLowI16x8U);
const extendHigh = unary(SIMD.i32x4ExtendHighI16x8U);

/** Memory access at `base` + `offset`; align 2^4 is the natural v128 alignment (a hint, not a check). */
const load = (base: number, offset = 0): Expr => [...get(base), ...simd(SIMD.v128Load, 4, ...uleb(offset))];
const store = (base: number, value: Expr, offset = 0): Bytes => [
  ...get(base),
  ...value,
  ...simd(SIMD.v128Store, 4, ...uleb(offset)),
];
/** Evaluates `value` into `local`, then `body` (which reads it with get). */
const bind = (local: number, value: Expr, body: Expr): Expr => [...value, OP.localSet, local, ...body];

/** A pointer local and the bytes it advances by each iteration. */
type Stride = readonly [local: number, stride: number];

/**
 * do { body; each pointer += its stride } while (pointers[0] < end), where `end` starts as a byte count
 * relative to pointers[0] and is turned into the address it ends at first.
 */
function strideLoop(body: Bytes, pointers: readonly Stride[], end: number): Bytes {
  const [lead] = pointers[0];
  const advance = pointers.flatMap(([local, stride]) => [
    ...get(local),
    OP.i32Const,
    ...sleb(stride),
    OP.i32Add,
    OP.localSet,
    local,
  ]);
  return [
    ...[...get(lead), ...get(end), OP.i32Add, OP.localSet, end],
    ...[OP.loop, EMPTY_BLOCK, ...body, ...advance],
    ...[...get(lead), ...get(end), OP.i32LtU, OP.brIf, 0, OP.end],
  ];
}

// --- Kernels ---------------------------------------------------------------------------------------

interface Kernel {
  readonly name: string;
  readonly params: number;
  /** v128 locals, numbered after the params. */
  readonly vectors: number;
  readonly code: Bytes;
}

/**
 * v128s per fold iteration: four let a core overlap their loads, which pays
 * on data in cache; a fold bound by memory bandwidth barely notices.
 */
const FOLD_UNROLL = 4;

/** fold_<name>(dst, a, b, bytes): params 0-3. */
function foldKernel(name: FoldName): Kernel {
  const [dst, a, b, bytes] = [0, 1, 2, 3];
  const body = Array.from({ length: FOLD_UNROLL }, (_, k) =>
    store(dst, binary(FOLDS[name])(load(a, 16 * k), load(b, 16 * k)), 16 * k),
  ).flat();
  const pointers: Stride[] = [
    [a, 16 * FOLD_UNROLL],
    [b, 16 * FOLD_UNROLL],
    [dst, 16 * FOLD_UNROLL],
  ];
  return { name: `fold_${name}`, params: 4, vectors: 0, code: strideLoop(body, pointers, bytes) };
}

// Conversion kernels take (dst, src, bytes) and use two v128 scratch locals.
const [DST, SRC, BYTES, X, Y] = [0, 1, 2, 3, 4];

/** float16 word (zero-extended in a lane) to float32 bits, exactly; NaN keeps its payload. */
function float16ToFloat32(word: Expr): Expr {
  const magnitude = get(Y);
  // Normal numbers: exponent and mantissa move up 13 bits and the exponent is rebiased by 127 - 15.
  // That leaves inf and NaN with exponent 143, which OR-ing in all exponent bits turns into 255.
  const normal = add(shl(magnitude, 13), splat(112 << 23));
  const infOrNaN = and(gtS(magnitude, splat(0x7bff)), splat(0x7f800000));
  // Subnormals and zero are mantissa * 2^-24, computed on float32 normals. The shorter trick of scaling
  // float32 subnormals by 2^112 made reducing subnormal float16 data many times slower on x86, where
  // every subnormal operand costs a microcode assist.
  const subnormal = fmul(convertS(magnitude), splat(0x33800000));
  const sign = shl(xor(get(X), magnitude), 16);
  const value = or(or(bitselect(subnormal, normal, ltS(magnitude, splat(0x400))), infOrNaN), sign);
  return bind(X, word, bind(Y, and(get(X), splat(0x7fff)), value));
}

/** float32 bits to the nearest float16 word, ties to even: the same function as float32BitsToFloat16Bits. */
function float32ToFloat16(bits: Expr): Expr {
  const magnitude = get(Y);
  // Normal results: rebias the exponent (-112 << 23) and round the 13 dropped bits, adding 0xfff plus
  // the kept lowest bit so that exact ties go to even; a carry correctly bumps the exponent.
  const lowestKept = and(shrU(magnitude, 13), splat(1));
  const normal = shrU(add(add(magnitude, splat(0xc8000fff)), lowestKept), 13);
  // Below 2^-14 the float16 step is 2^-24, the step of float32 numbers in [0.5, 1): adding 0.5 makes the
  // FPU round to that step (ties to even), and the low bits are then the float16 subnormal.
  const subnormal = sub(fadd(magnitude, splat(0x3f000000)), splat(0x3f000000));
  // Anything past the largest float16 exponent, float32 inf and NaN included, comes out as inf...
  const rounded = minU(bitselect(subnormal, normal, ltS(magnitude, splat(113 << 23))), splat(0x7c00));
  // ...and NaN gets its top payload bits and the quiet bit on top of that.
  const payload = and(or(shrU(magnitude, 13), splat(0x200)), splat(0x3ff));
  const nan = and(gtS(magnitude, splat(0x7f800000)), payload);
  const sign = shrU(xor(get(X), magnitude), 16);
  return bind(X, bits, bind(Y, and(get(X), splat(0x7fffffff)), or(or(rounded, nan), sign)));
}

/** bfloat16 word to float32 bits: it is the float32's top half. */
const bfloat16ToFloat32 = (word: Expr): Expr => shl(word, 16);

/** float32 bits to the nearest bfloat16 word, ties to even: the same function as float32BitsToBfloat16Bits. */
function float32ToBfloat16(bits: Expr): Expr {
  const x = get(X);
  const rounded = shrU(add(add(x, splat(0x7fff)), and(shrU(x, 16), splat(1))), 16);
  // Rounding could carry a NaN whose payload sits in the low half into inf; keep it NaN, quiet bit set.
  const nan = or(shrU(x, 16), splat(0x40));
  return bind(X, bits, bitselect(nan, rounded, gtS(and(x, splat(0x7fffffff)), splat(0x7f800000))));
}

/**
 * widen_*(dst, src, bytes): eight 16-bit words in, two vectors of float32 bits out; with `fold`, folded
 * into the float32 already at dst. Fusing saves a pass that stores and reloads the widened operand.
 */
function widenKernel(name: ConvertName, convert: (word: Expr) => Expr, fold?: Float32Fold): Kernel {
  const widen = (extend: (words: Expr) => Expr, offset: number) => {
    const value = convert(extend(load(SRC)));
    return store(DST, fold ? binary(FOLDS[fold])(load(DST, offset), value) : value, offset);
  };
  const pointers: Stride[] = [
    [SRC, 16],
    [DST, 32],
  ];
  return {
    name,
    params: 3,
    vectors: 2,
    code: strideLoop([...widen(extendLow, 0), ...widen(extendHigh, 16)], pointers, BYTES),
  };
}

/** narrow_*(dst, src, bytes): two vectors of float32 bits in, eight 16-bit words out. */
function narrowKernel(name: ConvertName, convert: (bits: Expr) => Expr): Kernel {
  // Every converted lane is in [0, 0xffff], so the saturating narrow just keeps the low halves.
  const words = [...convert(load(SRC)), ...convert(load(SRC, 16)), ...simd(SIMD.i16x8NarrowI32x4U)];
  const pointers: Stride[] = [
    [SRC, 32],
    [DST, 16],
  ];
  return { name, params: 3, vectors: 2, code: strideLoop(store(DST, words), pointers, BYTES) };
}

/**
 * The module: one memory of `pages` 64 KiB pages exported as "memory" (fixed size, so views of it never
 * detach), and the kernels.
 */
export function reduceModule(pages: number): Uint8Array {
  const kernels: Kernel[] = [
    ...Object.keys(FOLDS).map((name) => foldKernel(name as FoldName)),
    ...HALF_FORMATS.flatMap((half) => {
      const [widen, narrow] =
        half === 'f16' ? [float16ToFloat32, float32ToFloat16] : [bfloat16ToFloat32, float32ToBfloat16];
      return [
        widenKernel(`widen_${half}`, widen),
        narrowKernel(`narrow_${half}`, narrow),
        ...FLOAT32_FOLDS.map((fold) => widenKernel(`widen_${half}_${fold}`, widen, fold)),
      ];
    }),
  ];
  const signature = (params: number) => [TYPE.func, ...vec(Array(params).fill([TYPE.i32])), ...vec([])];
  const arities = [...new Set(kernels.map((k) => k.params))];
  const body = (k: Kernel) => {
    const code = [...vec(k.vectors > 0 ? [[...uleb(k.vectors), TYPE.v128]] : []), ...k.code, OP.end];
    return [...uleb(code.length), ...code];
  };
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d], // "\0asm"
    ...[0x01, 0x00, 0x00, 0x00], // binary format version 1
    ...section(SECTION.type, arities.map(signature)),
    ...section(
      SECTION.function,
      kernels.map((k) => uleb(arities.indexOf(k.params))),
    ),
    // Limits 0x01: minimum and maximum follow.
    ...section(SECTION.memory, [[0x01, ...uleb(pages), ...uleb(pages)]]),
    ...section(SECTION.export, [
      [...utf8('memory'), EXPORT.memory, 0],
      ...kernels.map((k, index) => [...utf8(k.name), EXPORT.func, ...uleb(index)]),
    ]),
    ...section(SECTION.code, kernels.map(body)),
  ]);
}
