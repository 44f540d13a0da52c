/**
 * What each op costs, as calls of the model: most ops are one call of their own kind; the object
 * collectives, barrier and recvObject are torch's sequences of calls. Each op carries nccl-tests'
 * bus bandwidth factor.
 */
import type { NcclCollective } from './nccl-model.ts';

/** Every ThreadGroup collective's name, send and recv and their forms. */
export type PredictOp =
  | 'allReduce'
  | 'broadcast'
  | 'reduce'
  | 'allGather'
  | 'allGatherInto'
  | 'reduceScatter'
  | 'reduceScatterTensor'
  | 'allToAll'
  | 'allToAllSingle'
  | 'gather'
  | 'scatter'
  | 'barrier'
  | 'monitoredBarrier'
  | 'broadcastObject'
  | 'allGatherObject'
  | 'gatherObject'
  | 'scatterObject'
  | 'send'
  | 'recv'
  | 'recvObject'
  | 'sendViews'
  | 'recvViews'
  | 'recvFromAny';

export type ModelOp = NcclCollective | 'allToAll' | 'gather' | 'scatter' | 'send' | 'monitoredBarrier';

export interface Step {
  op: ModelOp;
  bytes: number;
  /** The step whose algorithm and protocol the prediction reports. */
  payload?: true;
}

export interface OpPlan {
  steps(ranks: number, bytes: number): Step[];
  /** nccl-tests' bus bandwidth factor. */
  busbw(ranks: number): number;
  /** A transfer between two ranks (send, recv and their forms). */
  pair?: true;
}

/** torch's object collectives exchange sizes as one int64 a rank. */
const SIZE_BYTES = 8;
/** torch's NCCL barrier all-reduces one float32 (ProcessGroupNCCL::barrier). */
const BARRIER_BYTES = 4;

const allReduceFactor = (n: number) => (2 * (n - 1)) / n;
const shareFactor = (n: number) => (n - 1) / n;
const oneFactor = () => 1;
const single = (op: ModelOp, busbw: (n: number) => number): OpPlan => ({
  steps: (_n, bytes) => [{ op, bytes, payload: true }],
  busbw,
});

const TRANSFER: OpPlan = { ...single('send', oneFactor), pair: true };

export const OPS: Readonly<Record<PredictOp, OpPlan>> = {
  allReduce: single('allReduce', allReduceFactor),
  broadcast: single('broadcast', oneFactor),
  reduce: single('reduce', oneFactor),
  allGather: single('allGather', shareFactor),
  allGatherInto: single('allGather', shareFactor),
  reduceScatter: single('reduceScatter', shareFactor),
  reduceScatterTensor: single('reduceScatter', shareFactor),
  allToAll: single('allToAll', shareFactor),
  allToAllSingle: single('allToAll', shareFactor),
  gather: single('gather', shareFactor),
  scatter: single('scatter', shareFactor),
  send: TRANSFER,
  recv: TRANSFER,
  sendViews: TRANSFER,
  recvViews: TRANSFER,
  recvFromAny: TRANSFER,
  // torch's send_object_list / recv_object_list: the size, then the payload.
  recvObject: {
    steps: (_n, bytes) => [
      { op: 'send', bytes: SIZE_BYTES },
      { op: 'send', bytes, payload: true },
    ],
    busbw: oneFactor,
    pair: true,
  },
  barrier: {
    steps: () => [{ op: 'allReduce', bytes: BARRIER_BYTES, payload: true }],
    busbw: allReduceFactor,
  },
  monitoredBarrier: {
    steps: () => [{ op: 'monitoredBarrier', bytes: SIZE_BYTES, payload: true }],
    busbw: allReduceFactor,
  },
  // torch's broadcast_object_list: the sizes, then the payload.
  broadcastObject: {
    steps: (_n, bytes) => [
      { op: 'broadcast', bytes: SIZE_BYTES },
      { op: 'broadcast', bytes, payload: true },
    ],
    busbw: oneFactor,
  },
  // all_gather_object: every rank's size, then the payloads padded to the largest.
  allGatherObject: {
    steps: (n, bytes) => [
      { op: 'allGather', bytes: SIZE_BYTES * n },
      { op: 'allGather', bytes, payload: true },
    ],
    busbw: shareFactor,
  },
  // gather_object: all_gather of the sizes, then gather.
  gatherObject: {
    steps: (n, bytes) => [
      { op: 'allGather', bytes: SIZE_BYTES * n },
      { op: 'gather', bytes, payload: true },
    ],
    busbw: shareFactor,
  },
  // scatter_object_list: broadcast of the largest size, scatter of the payloads, scatter of the sizes.
  scatterObject: {
    steps: (n, bytes) => [
      { op: 'broadcast', bytes: SIZE_BYTES },
      { op: 'scatter', bytes, payload: true },
      { op: 'scatter', bytes: SIZE_BYTES * n },
    ],
    busbw: shareFactor,
  },
};
