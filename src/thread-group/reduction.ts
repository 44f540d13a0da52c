/**
 * The reduction a collective applies: one of the element-wise ReduceOps, or
 * premulSum (torch's ReduceOp.PREMUL_SUM, NCCL's ncclRedOpCreatePreMulSum):
 * each rank multiplies its own inputs by its factor, then the products are
 * summed. The factor is local to the rank, as in NCCL, so ranks may pass
 * different ones; the op itself is part of the call every rank must agree on.
 */
import { rawToNumber, scalarToRaw } from '../tensor/convert.ts';
import { type DType, isFloatingDType } from '../tensor/dtype.ts';
import { assertReduceOp, isReduceOp, REDUCE_OPS, type ReduceOp } from '../tensor/reduce-ops.ts';

export interface PremulSum {
  op: 'premulSum';
  /** What this rank's inputs are multiplied by before the sum. */
  factor: number;
}

/** What a backend reduces with: a ReduceOp, or premulSum with this rank's factor. */
export type Reduction = ReduceOp | PremulSum;

/** The `op` a reducing call accepts. */
export type CollectiveReduceOp = ReduceOp | 'premulSum';

export function isPremulSum(reduction: Reduction): reduction is PremulSum {
  return typeof reduction === 'object';
}

/** The op's name, as call signatures show it (the factor is per rank, so it is not compared). */
export function reductionName(reduction: Reduction): CollectiveReduceOp {
  return isPremulSum(reduction) ? 'premulSum' : reduction;
}

/**
 * Checks a reducing call's `op` and `factor` for `dtype` tensors: a TypeError
 * or RangeError naming the call for an unknown op, an op the dtype does not
 * have, premulSum on a non-float dtype or without a usable factor, or a factor
 * given to any other op.
 */
export function checkReduction(
  options: { op?: unknown; factor?: unknown } | undefined,
  dtype: DType,
  where: string,
): Reduction {
  const op = options?.op ?? 'sum';
  const factor = options?.factor;
  // The default, checked first: sum is defined for every dtype, and most calls take it.
  if (op === 'sum' && factor === undefined) return op;
  if (op !== 'premulSum') {
    if (!isReduceOp(op)) {
      const shown = typeof op === 'string' ? JSON.stringify(op) : `of type ${typeof op}`;
      throw new TypeError(
        `${where}: unknown reduce op ${shown}; expected one of ${[...REDUCE_OPS, 'premulSum'].join(', ')}`,
      );
    }
    if (factor !== undefined) {
      throw new TypeError(`${where}: factor is only for op 'premulSum', not '${op}'`);
    }
    return assertReduceOp(op, dtype, where);
  }
  if (!isFloatingDType(dtype)) {
    throw new TypeError(`${where}: premulSum is defined for floating-point tensors only, got ${dtype}`);
  }
  if (typeof factor !== 'number') {
    throw new TypeError(`${where}: premulSum needs a numeric factor, got ${describe(factor)}`);
  }
  // Each rank's inputs are multiplied by the factor as the dtype holds it (NCCL takes it in the dtype too).
  const held = scalarToRaw(factor, dtype);
  if (held === undefined || !Number.isFinite(rawToNumber(dtype)(held))) {
    throw new RangeError(`${where}: premulSum factor ${factor} is not a finite ${dtype}`);
  }
  return { op: 'premulSum', factor };
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
