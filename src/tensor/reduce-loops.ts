/**
 * The element-wise loops under reduceArrays, compiled once per (operation,
 * typed-array class).
 *
 * Why compiled from text: V8 keeps type feedback per function literal, so a
 * loop shared by Int8Array, Int32Array, Float32Array... goes polymorphic and
 * runs far slower than one that only ever sees one class (each access checks
 * the class instead of assuming it); a hand-written copy per class would be
 * ~40 near-identical loops.
 * Each source starts with its own label, which keeps V8's compilation cache
 * from handing two classes the same function. Sources are assembled only from
 * the constant templates in this file, never from caller data.
 */
import type { TypedArray } from './dtype.ts';

/** Binary operators the loops fold with; avg and the bool ops are mapped onto these by the caller. */
export type FoldOp = 'sum' | 'prod' | 'min' | 'max' | 'band' | 'bor' | 'bxor';

/** out[i] = op(a[i], b[i]) for every i < out.length; `out` may be `a` or `b` itself. */
export type FoldLoop = (out: TypedArray, a: TypedArray, b: TypedArray) => void;

/** out[i] = out[i] / divisor, truncated toward zero for integer arrays; bigint divisor for BigInt64Array. */
export type DivideLoop = (out: TypedArray, divisor: number | bigint) => void;

/**
 * int64 runs as plain BigInt64Array loops: since V8 11 (Node 20) TurboFan compiles `o[i] = a[i] + b[i]`
 * there to native wrapping 64-bit ops (sum, prod, bitwise alike): one instruction where adding 32-bit
 * halves with a carry through Uint32Array views takes several, and max alike.
 */
type Arithmetic = 'float' | 'int' | 'bigint';

/** Each operator as an expression in the operands `x` and `y`, per kind of arithmetic. */
const FOLD_EXPR: Record<FoldOp, (kind: Arithmetic) => string> = {
  // Integer stores wrap like the C type, and x + y of two int32 values is exact in a double.
  sum: () => 'x + y',
  // An int32 product can pass 2^53 and lose low bits; Math.imul keeps the low 32 exactly.
  prod: (kind) => (kind === 'int' ? 'Math.imul(x, y)' : 'x * y'),
  // Math.min/max propagate NaN (as torch does). For int32-range values -(x < y) is an all-ones mask when
  // y wins, a branch-free select: a compare-and-branch mispredicts on mixed data.
  // bigint has neither Math.min nor the mask trick.
  min: (kind) =>
    ({ float: 'Math.min(x, y)', int: 'y ^ ((x ^ y) & -(x < y))', bigint: 'x < y ? x : y' })[kind],
  max: (kind) =>
    ({ float: 'Math.max(x, y)', int: 'x ^ ((x ^ y) & -(x < y))', bigint: 'x > y ? x : y' })[kind],
  band: () => 'x & y',
  bor: () => 'x | y',
  bxor: () => 'x ^ y',
};

// Eight statements per iteration amortise the map and field checks V8 repeats for every typed-array
// access in a loop; eight still gained on four where the loop body is as small as a float32 sum's.
const UNROLL = 8;

const compiled = new Map<string, FoldLoop | DivideLoop>();

function arithmeticOf(array: TypedArray): Arithmetic {
  if (array instanceof Float64Array || array instanceof Float32Array) return 'float';
  return array instanceof BigInt64Array ? 'bigint' : 'int';
}

/** Compiles `statement(i)` for i in [0, o.length): the n % UNROLL leftovers, then the unrolled body. */
function compileLoop(label: string, params: readonly string[], statement: (i: string) => string): unknown {
  const body = Array.from({ length: UNROLL }, (_, k) => statement(k === 0 ? 'i' : `i + ${k}`));
  // Leftovers go first: V8 tends to optimize these loops on-stack mid-way through the first call, and
  // a leftover loop after the body would then be code without type feedback; the on-stack code bails
  // out there, and V8 was seen re-entering and bailing out of it on every later call.
  const source = [
    `// tensorcomm reduce loop ${label}`,
    'const n = o.length;',
    'let i = 0;',
    `for (const head = n % ${UNROLL}; i < head; i++) ${statement('i')}`,
    `for (; i < n; i += ${UNROLL}) {`,
    ...body,
    '}',
  ].join('\n');
  return new Function(...params, source);
}

function cached<T extends FoldLoop | DivideLoop>(label: string, build: () => T): T {
  let loop = compiled.get(label);
  if (loop === undefined) compiled.set(label, (loop = build()));
  return loop as T;
}

/** Fold loops by op and array class, found without making a label: every small reduction asks for one. */
const foldLoops = new Map<FoldOp, Map<unknown, FoldLoop>>();

/** The fold loop for `op` over arrays of the same class as `like`. */
export function foldLoop(op: FoldOp, like: TypedArray): FoldLoop {
  let byClass = foldLoops.get(op);
  if (byClass === undefined) foldLoops.set(op, (byClass = new Map()));
  let loop = byClass.get(like.constructor);
  if (loop === undefined) {
    const label = `${op}:${like.constructor.name}`;
    const expr = FOLD_EXPR[op](arithmeticOf(like));
    // Both operands are read before the store, which is what makes out === a or out === b safe.
    const statement = (i: string) => `{ const x = a[${i}], y = b[${i}]; o[${i}] = ${expr}; }`;
    loop = compileLoop(label, ['o', 'a', 'b'], statement) as FoldLoop;
    byClass.set(like.constructor, loop);
  }
  return loop;
}

/** The in-place divide loop that turns a sum into an average, for arrays of the same class as `like`. */
export function divideLoop(like: TypedArray): DivideLoop {
  const label = `avg:${like.constructor.name}`;
  return cached(label, () => {
    // `| 0` truncates toward zero like C integer division; the sums it sees are already wrapped to int32 or less.
    const quotient =
      arithmeticOf(like) === 'int' ? (i: string) => `(o[${i}] / d) | 0` : (i: string) => `o[${i}] / d`;
    return compileLoop(label, ['o', 'd'], (i) => `o[${i}] = ${quotient(i)};`) as DivideLoop;
  });
}
