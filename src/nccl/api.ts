/**
 * What tensorcomm needs from libnccl, as typed synchronous calls. Handles are
 * opaque BigInt pointers (koffi 3); unique ids are byte arrays, never strings.
 * Every failing call throws an NcclError naming the call and NCCL's own error
 * name and text. Call these only from the rank's own thread.
 */
import type { DevicePointer, StreamHandle } from '../cuda/api.ts';

export type CommHandle = bigint;

export const NCCL_UNIQUE_ID_BYTES = 128;

/** ncclResult_t. */
export const NcclResult = {
  success: 0,
  unhandledCudaError: 1,
  systemError: 2,
  internalError: 3,
  invalidArgument: 4,
  invalidUsage: 5,
  remoteError: 6,
  inProgress: 7,
} as const;

/** ncclDataType_t. */
export const NcclDataType = {
  int8: 0,
  uint8: 1,
  int32: 2,
  uint32: 3,
  int64: 4,
  uint64: 5,
  float16: 6,
  float32: 7,
  float64: 8,
  bfloat16: 9,
} as const;

/** ncclRedOp_t (the built-in ones). */
export const NcclRedOp = { sum: 0, prod: 1, max: 2, min: 3, avg: 4 } as const;

/**
 * ncclNumOps: how many built-in ops there are; ops NCCL creates
 * (ncclRedOpCreatePreMulSum) come after them. This value and
 * NcclScalarResidence's are NVIDIA/nccl's src/nccl.h.in (NCCL 2.11 on).
 */
export const NCCL_NUM_OPS = 5;

/**
 * ncclScalarResidence_t: where ncclRedOpCreatePreMulSum's scalar lives.
 * hostImmediate: host memory, read before the call returns.
 */
export const NcclScalarResidence = { device: 0, hostImmediate: 1 } as const;

export interface NcclCommOptions {
  /** false: ncclCommInitRankConfig with blocking = 0; poll commGetAsyncError until it leaves inProgress. */
  blocking: boolean;
}

export interface NcclLibrary {
  readonly path: string;
  /** ncclGetVersion, e.g. 22105 for 2.21.5. */
  version(): number;
  getUniqueId(): Uint8Array;
  commInitRank(worldSize: number, uniqueId: Uint8Array, rank: number, options: NcclCommOptions): CommHandle;
  /** An NcclResult value; inProgress while a non-blocking init or call is still running. */
  commGetAsyncError(comm: CommHandle): number;
  commFinalize(comm: CommHandle): void;
  commDestroy(comm: CommHandle): void;
  commAbort(comm: CommHandle): void;
  allReduce(
    send: DevicePointer,
    recv: DevicePointer,
    count: number,
    dtype: number,
    op: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  broadcast(
    send: DevicePointer,
    recv: DevicePointer,
    count: number,
    dtype: number,
    root: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  reduce(
    send: DevicePointer,
    recv: DevicePointer,
    count: number,
    dtype: number,
    op: number,
    root: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  /** `sendCount` elements from each rank, concatenated in rank order into `recv`. */
  allGather(
    send: DevicePointer,
    recv: DevicePointer,
    sendCount: number,
    dtype: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  /** `recvCount` elements per rank out of `send` (recvCount * nranks long). */
  reduceScatter(
    send: DevicePointer,
    recv: DevicePointer,
    recvCount: number,
    dtype: number,
    op: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  send(
    buffer: DevicePointer,
    count: number,
    dtype: number,
    peer: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  recv(
    buffer: DevicePointer,
    count: number,
    dtype: number,
    peer: number,
    comm: CommHandle,
    stream: StreamHandle,
  ): void;
  groupStart(): void;
  groupEnd(): void;
  /**
   * ncclRedOpCreatePreMulSum (ncclScalarHostImmediate): an op of `comm` that
   * multiplies each rank's inputs by `scalar` (one element of `dtype`, read
   * now), then sums. Only for calls on `comm` with that dtype.
   */
  redOpCreatePreMulSum(scalar: Uint8Array, dtype: number, comm: CommHandle): number;
  /** ncclRedOpDestroy: allowed as soon as the last call given the op has returned. */
  redOpDestroy(op: number, comm: CommHandle): void;
}
