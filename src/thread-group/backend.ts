/**
 * Backend: how a ThreadGroup's calls are carried out (c10d keeps Backend apart
 * from the group API the same way). ThreadGroup validates arguments, numbers
 * the call and wraps it in a Work; a Backend only moves and reduces data.
 * StoreBackend serves every TensorStore; NcclBackend (src/nccl/) serves
 * groups whose members are on distinct GPUs.
 */
import type { CallRecord } from '../debug/call-record.ts';
import type { HangFocus } from '../debug/hang-report.ts';
import type { RankMonitor } from '../debug/monitor.ts';
import { CollectiveMismatchError } from '../runtime/errors.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { Reduction } from './reduction.ts';

/** A group as a backend sees it: its key prefix, its name for messages, and its members. */
export interface GroupView {
  /** Key prefix unique to the group within the job. */
  id: string;
  name: string;
  rank: number;
  size: number;
  /** Global rank of each group rank, for messages. */
  ranks: readonly number[];
}

/** Two ranks disagree about a call; `peerRank` (global) is the other one, for its call site. */
export class CallMismatchError extends CollectiveMismatchError {
  constructor(
    message: string,
    readonly peerRank: number,
  ) {
    super(message);
  }
}

/** One numbered call on a group, as every member issues it. */
export interface CallInfo {
  /** Per-group sequence number: collectives are issued in the same order on every member. */
  seq: number;
  /** Fingerprint compared between ranks, e.g. `allReduce(float32[4,8], sum)`. */
  signature: string;
  timeoutMs: number;
  /**
   * Whether rooted and pairwise collectives start with the fingerprint exchange
   * (DebugOptions.checks; the same on every rank of a job). Default true.
   */
  checks?: boolean;
  /**
   * The call as the rank's monitor tracks it: lets slow waits check on peers and explain timeouts.
   * @internal
   */
  debug?: CallDebug;
}

/**
 * What a backend's call returns when it completed the call before returning
 * (a small collective whose peers were there already): this very promise, so
 * the group settles the call's Work at once instead of a promise turn later.
 */
export const COMPLETED: Promise<void> = Promise.resolve();

/** `value` once the backend's call `running` is done: at once where it returned COMPLETED. */
export function valueWhenDone<T>(running: Promise<void>, value: T): T | Promise<T> {
  return running === COMPLETED ? value : running.then(() => value);
}

/** How often a monitored call's slow wait looks at its peers, so that one that left fails it at once. */
export const PEER_CHECK_MS = 100;

export interface CallDebug {
  monitor: RankMonitor;
  record: CallRecord;
  /** The group and call number, for hang reports. */
  focus: HangFocus;
  /** How often the call's slow waits look at their peers and say whom they wait for (PEER_CHECK_MS unless its group says). */
  peerCheckMs: number;
}

/** The group rank that waits for every other rank in a monitoredBarrier (torch's: rank 0). */
export const MONITORED_BARRIER_ROOT = 0;

/** Which keys of the first exchange a call touches: used to tell peers about a call that failed locally. */
export type ArrivalPattern =
  | { kind: 'all' }
  | { kind: 'pairwise' }
  | { kind: 'fromRoot'; root: number }
  | { kind: 'fromRootPairwise'; root: number }
  | { kind: 'toRoot'; root: number }
  /** Every other rank's value to the root, and the root's one value to every other rank (monitoredBarrier). */
  | { kind: 'viaRoot'; root: number }
  | { kind: 'send'; peer: number; tag: number }
  | { kind: 'recv'; peer: number; tag: number };

/** One send or receive of a batchIsendIrecv, checked and numbered like a lone send/recv. */
export interface BatchedP2P {
  kind: 'send' | 'recv';
  call: CallInfo;
  tensor: Tensor;
  /** Group rank of the other end. */
  peer: number;
  tag: number;
}

/** A received tensor lent by its sender: valid until release(), which lets the sender's send complete. */
export interface BorrowedTensor {
  tensor: Tensor;
  release(): Promise<void>;
}

/** Tensors received by recvViews: uint8 views on the sender's bytes, valid until release(). */
export interface BorrowedViews {
  views: Tensor[];
  release(): Promise<void>;
}

/** What releasing a message received as the receiver's own copy does: nothing. */
export const NOTHING_HELD = async (): Promise<void> => {};

/**
 * How a group's calls are carried out. As in c10d, an op a backend lacks has
 * a default here: a fallback where one exists (recvBorrowed receives into
 * `like`), else an error naming the op and the backend; the flags
 * (`lendsViews`, `runsBatches`) say which of those ops a backend carries.
 */
export abstract class Backend {
  /** The backend's name in errors ("StoreBackend"), as c10d's getBackendName. */
  abstract readonly backendName: string;
  abstract allReduce(call: CallInfo, tensor: Tensor, op: Reduction): Promise<void>;
  abstract broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void>;
  abstract reduce(call: CallInfo, tensor: Tensor, dst: number, op: Reduction): Promise<void>;
  abstract allGather(call: CallInfo, outputs: readonly Tensor[], input: Tensor): Promise<void>;
  abstract allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void>;
  /** `inputs[p]` has the shape of rank p's output; they may differ (an uneven reduce-scatter). */
  abstract reduceScatter(
    call: CallInfo,
    output: Tensor,
    inputs: readonly Tensor[],
    op: Reduction,
  ): Promise<void>;
  abstract reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: Reduction): Promise<void>;
  abstract allToAll(call: CallInfo, outputs: readonly Tensor[], inputs: readonly Tensor[]): Promise<void>;
  abstract allToAllSingle(
    call: CallInfo,
    output: Tensor,
    input: Tensor,
    outputSplits: readonly number[],
    inputSplits: readonly number[],
  ): Promise<void>;
  abstract gather(
    call: CallInfo,
    tensor: Tensor,
    dst: number,
    gatherList: readonly Tensor[] | undefined,
  ): Promise<void>;
  abstract scatter(
    call: CallInfo,
    tensor: Tensor,
    src: number,
    scatterList: readonly Tensor[] | undefined,
  ): Promise<void>;
  abstract barrier(call: CallInfo): Promise<void>;
  /**
   * Group rank 0 waits up to `call.timeoutMs` for every other rank to arrive,
   * then tells each whether all did; it fails naming the ranks that did not
   * (the first in rank order, or all of them with `waitAllRanks`).
   */
  abstract monitoredBarrier(call: CallInfo, waitAllRanks: boolean): Promise<void>;
  abstract send(call: CallInfo, tensor: Tensor, dst: number, tag: number): Promise<void>;

  /**
   * The early send: send's first half where the medium allows, called with
   * arguments already checked and before the call's bookkeeping. Writes
   * `tensor` to `dst` at once if it can (a small message with room for it),
   * returning a nonzero ticket for awaitEarlySend, which completes the send;
   * 0, with nothing sent, for send to do it all (the default). A receiver
   * waiting for the message goes on while this rank does its bookkeeping.
   */
  sendEarly(_tensor: Tensor, _dst: number, _tag: number): number {
    return 0;
  }

  awaitEarlySend(_call: CallInfo, _dst: number, _ticket: number): Promise<void> {
    throw unsupported(this, 'awaitEarlySend');
  }

  abstract recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void>;

  /**
   * A receive that lends the sender's own buffer instead of copying it, where
   * the medium allows (a store hands out views); the sender's send completes
   * once the receiver calls release(). By default the message is received
   * into `like`, and release() does nothing.
   */
  async recvBorrowed(call: CallInfo, like: Tensor, src: number, tag: number): Promise<BorrowedTensor> {
    await this.recv(call, like, src, tag);
    return { tensor: like, release: NOTHING_HELD };
  }

  /** recvBorrowed of a value whose size only the sender knows; by default the receiver's own copy (recvAny). */
  async recvAnyBorrowed(call: CallInfo, src: number, tag: number): Promise<BorrowedTensor> {
    return { tensor: await this.recvAny(call, src, tag), release: NOTHING_HELD };
  }

  /**
   * Whether sendViews/recvViews are carried: the receiver maps the sender's
   * host memory (a store with srcSetViews, i.e. ranks as threads).
   */
  get lendsViews(): boolean {
    return false;
  }

  /**
   * Memory the members on one node map in common (ThreadGroup.nodeMemory): `bytes` of group rank `owner`'s
   * under `key`; by default none.
   */
  nodeMemory(_key: string, _owner: number, _bytes: number): Uint8Array | undefined {
    return undefined;
  }

  /** Several host tensors as one message, lent (not copied) to the receiver; completes once it released them. */
  sendViews(_call: CallInfo, _tensors: readonly Tensor[], _dst: number, _tag: number): Promise<void> {
    throw unsupported(this, 'sendViews');
  }

  recvViews(_call: CallInfo, _src: number, _tag: number): Promise<BorrowedViews> {
    throw unsupported(this, 'recvViews');
  }

  /** A receive whose size only the sender knows (object messages); the result is the receiver's own copy. */
  abstract recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor>;
  /** A receive into `tensor` from whichever peer's message on `tag` comes first; resolves to its group rank. */
  abstract recvFromAny(call: CallInfo, tensor: Tensor, tag: number): Promise<number>;
  /** Broadcast of a value only the root knows the size of; `tensor` is undefined off the root. */
  abstract broadcastAny(call: CallInfo, tensor: Tensor | undefined, src: number): Promise<Tensor>;
  /** All-gather of differently sized values, in group-rank order. */
  abstract allGatherAny(call: CallInfo, tensor: Tensor): Promise<Tensor[]>;
  /** Gather of differently sized values to `dst`: every rank's value on dst, in group-rank order; undefined elsewhere. */
  abstract gatherAny(call: CallInfo, tensor: Tensor, dst: number): Promise<Tensor[] | undefined>;
  /** Scatter of differently sized values from `src` (`tensors` is undefined off src); this rank's value. */
  abstract scatterAny(call: CallInfo, tensors: readonly Tensor[] | undefined, src: number): Promise<Tensor>;

  /** Whether batch runs a batchIsendIrecv's entries together; without it each runs as its own send or recv. */
  get runsBatches(): boolean {
    return false;
  }

  /**
   * The sends and receives of one batchIsendIrecv, run together (one NCCL
   * group), so no order of them can deadlock; one promise per entry, in order.
   */
  batch(_entries: readonly BatchedP2P[]): Array<Promise<void>> {
    throw unsupported(this, 'batch');
  }

  /** Tells the peers of a call that failed its local checks, so they fail too instead of waiting. */
  abstract abandon(call: CallInfo, pattern: ArrivalPattern, error: Error): Promise<void>;
  abstract destroy(): void;
}

/**
 * What an op a backend lacks throws: "NcclBackend does not support sendViews". ThreadGroup asks a
 * backend only for what it says it carries (lendsViews, runsBatches, a ticket from sendEarly): only a
 * bug in tensorcomm gets here.
 */
function unsupported(backend: Backend, op: string): Error {
  return new Error(`${backend.backendName} does not support ${op}`);
}
