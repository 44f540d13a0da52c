/**
 * How tensorcomm's dtypes and reduce ops map onto NCCL's. Calls that only move
 * data (broadcast, gathers, scatters, all-to-all, send/recv) carry raw bytes,
 * so every dtype travels; reductions need one of NCCL's own types and ops.
 */
import type { DType } from '../tensor/dtype.ts';
import { isBitwiseOp } from '../tensor/reduce-ops.ts';
import { Tensor } from '../tensor/tensor.ts';
import { isPremulSum, type Reduction } from '../thread-group/reduction.ts';
import { NcclDataType, NcclRedOp } from './api.ts';

/** What NCCL reduces: its data type and reduction operator. */
export interface NcclReduction {
  dtype: number;
  /** A built-in ncclRedOp_t; unused when `premulScalar` is set. */
  op: number;
  /**
   * premulSum's factor as one element of the dtype: the op is then made per
   * call (ncclRedOpCreatePreMulSum), because NCCL's ops belong to a communicator.
   */
  premulScalar?: Uint8Array;
}

/** Bytes, for the calls that only move data. */
export const NCCL_BYTES = NcclDataType.uint8;

const REDUCIBLE: Partial<Record<DType, number>> = {
  float64: NcclDataType.float64,
  float32: NcclDataType.float32,
  float16: NcclDataType.float16,
  bfloat16: NcclDataType.bfloat16,
  int64: NcclDataType.int64,
  int32: NcclDataType.int32,
  int8: NcclDataType.int8,
  uint8: NcclDataType.uint8,
  // Stored as 0/1 bytes: or is max, and is min (see boolOp).
  bool: NcclDataType.uint8,
};

/**
 * NCCL's type and op for `op` on `dtype` tensors. ncclAvg on integers sums
 * (wrapping) and then divides truncating toward zero, as reduceArrays does.
 */
export function ncclReduction(reduction: Reduction, dtype: DType, where: string): NcclReduction {
  if (isPremulSum(reduction)) {
    const type = REDUCIBLE[dtype]!;
    // A copy in an ArrayBuffer of its own: what koffi hands NCCL as the scalar's host pointer.
    const scalar = Tensor.fromArray([reduction.factor], [1], dtype).bytes().slice();
    return { dtype: type, op: NcclRedOp.sum, premulScalar: scalar };
  }
  const op = reduction;
  if (isBitwiseOp(op)) {
    throw new TypeError(
      `${where}: NCCL has no ${op} reduction, so ${op} is not available for GPU tensors of a group on distinct ` +
        "GPUs (torch's NCCL backend has none either); reduce on the CPU, or use min/max on bool tensors",
    );
  }
  const type = REDUCIBLE[dtype];
  if (type === undefined) {
    throw new TypeError(
      `${where}: NCCL cannot reduce ${dtype} tensors (it has no ${dtype} type); ` +
        `convert to one of ${Object.keys(REDUCIBLE).join(', ')} first`,
    );
  }
  return { dtype: type, op: dtype === 'bool' ? boolOp(op) : NcclRedOp[op] };
}

/** Logical or (sum, max, avg) is max on 0/1 bytes; logical and (prod, min) is min. */
function boolOp(op: 'sum' | 'avg' | 'prod' | 'min' | 'max'): number {
  return op === 'prod' || op === 'min' ? NcclRedOp.min : NcclRedOp.max;
}
