import { type DType, isFloatingDType } from './dtype.ts';

/** Reduction operators of reduce / allReduce / reduceScatter, named as in torch.distributed.ReduceOp. */
export type ReduceOp = 'sum' | 'avg' | 'prod' | 'min' | 'max' | 'band' | 'bor' | 'bxor';

export const REDUCE_OPS: readonly ReduceOp[] = Object.freeze([
  'sum',
  'avg',
  'prod',
  'min',
  'max',
  'band',
  'bor',
  'bxor',
]);

type BitwiseOp = 'band' | 'bor' | 'bxor';
const BITWISE_OPS: ReadonlySet<ReduceOp> = new Set<BitwiseOp>(['band', 'bor', 'bxor']);

export function isReduceOp(value: unknown): value is ReduceOp {
  return typeof value === 'string' && REDUCE_OPS.includes(value as ReduceOp);
}

/** band, bor and bxor. */
export function isBitwiseOp(op: ReduceOp): op is BitwiseOp {
  return BITWISE_OPS.has(op);
}

/** Whether `op` is defined for `dtype` tensors: bitwise ops are not for floating dtypes. */
export function isReduceOpDefined(op: ReduceOp, dtype: DType): boolean {
  return !(isBitwiseOp(op) && isFloatingDType(dtype));
}

/** Checks that `op` is a reduce op and is defined for `dtype`; throws a TypeError naming `where`. */
export function assertReduceOp(op: unknown, dtype: DType, where: string): ReduceOp {
  if (!isReduceOp(op)) {
    // JSON.stringify throws on bigint and drops symbols, so only strings are quoted.
    const shown = typeof op === 'string' ? JSON.stringify(op) : `of type ${typeof op}`;
    throw new TypeError(
      `${where}: unknown reduce op ${shown} for ${dtype} tensors; expected one of ${REDUCE_OPS.join(', ')}`,
    );
  }
  if (!isReduceOpDefined(op, dtype)) {
    throw new TypeError(`${where}: ${op} is defined for integer and bool tensors only, got ${dtype}`);
  }
  return op;
}
