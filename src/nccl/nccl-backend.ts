/**
 * NcclBackend: a ThreadGroup's calls over NCCL, for a group whose members are
 * all on distinct GPUs. Calls on the rank's GPU tensors go to NCCL (one
 * communicator per group, made by the first of them; one stream); calls on
 * CPU tensors, object calls and `abandon` go to a StoreBackend over the same
 * store, as torch pairs gloo with NCCL ("cpu:gloo,cuda:nccl"). Constructing
 * one loads no CUDA library: that waits for the first GPU call.
 */

import { useDevice as useCudaDevice } from '../cuda/device-memory.ts';
import { deviceIndex } from '../tensor/device.ts';
import type { Device } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import {
  type ArrivalPattern,
  Backend,
  type BatchedP2P,
  type CallInfo,
  type GroupView,
} from '../thread-group/backend.ts';
import type { Reduction } from '../thread-group/reduction.ts';
import { ncclReduction } from './nccl-dtypes.ts';
import { ncclLibrary } from './nccl-library.ts';
import * as ops from './nccl-ops.ts';
import { type DeviceOp, type GpuBindings, NcclWorkQueue } from './nccl-work-queue.ts';

export interface NcclBackendOptions {
  /** This rank's GPU, 'cuda:N'. */
  device: Device;
  /** How long destroy waits for the communicator to finalize before aborting it. */
  destroyTimeoutMs: number;
  /** Carries the group's CPU tensors, object calls and abandon notices (torch's cpu:gloo beside cuda:nccl). */
  fallback: Backend;
  /**
   * Carries the NCCL unique id from group rank 0 to the others: a backend
   * over the same members with a key space of its own, so the exchange never
   * meets the group's numbered calls.
   */
  bootstrap: Backend;
}

/**
 * Whether a group of members on these devices runs on NCCL: every member on a
 * GPU of its own. `nodes` (by member, for a job spanning nodes) tells GPUs of
 * different machines apart: cuda:0 of two nodes are two GPUs.
 */
export function ncclServes(devices: readonly Device[], nodes?: readonly string[]): boolean {
  const gpus = devices.map((d, i) => (nodes ? `${nodes[i]}\n${d}` : d));
  return devices.every((d) => d.startsWith('cuda:')) && new Set(gpus).size === devices.length;
}

export class NcclBackend extends Backend {
  readonly backendName = 'NcclBackend';
  readonly #group: GroupView;
  readonly #device: Device;
  readonly #place: ops.OpPlace;
  readonly #fallback: Backend;
  readonly #queue: NcclWorkQueue;
  readonly #destroyTimeoutMs: number;

  constructor(group: GroupView, options: NcclBackendOptions) {
    super();
    if (!options.device.startsWith('cuda:')) {
      throw new TypeError(
        `NcclBackend: group "${group.name}" needs a 'cuda:N' device, got '${options.device}'`,
      );
    }
    this.#group = group;
    this.#device = options.device;
    this.#place = { rank: group.rank, size: group.size, device: options.device };
    this.#destroyTimeoutMs = options.destroyTimeoutMs;
    this.#fallback = options.fallback;
    const index = deviceIndex(options.device);
    const where = `NCCL backend of group "${group.name}"`;
    const useDevice = (): GpuBindings => ({ cuda: useCudaDevice(index, where), nccl: ncclLibrary() });
    this.#queue = new NcclWorkQueue({ group, useDevice, bootstrap: options.bootstrap });
  }

  /**
   * Whether a call on these tensors runs on NCCL (all on this rank's GPU) or
   * on the store (all on the CPU); a mixture, or another GPU, is a TypeError.
   */
  #onGpu(op: string, tensors: readonly Tensor[]): boolean {
    const host = tensors.filter((t) => t.device === 'cpu').length;
    if (host === tensors.length) return false;
    const where = `${op} on group "${this.#group.name}"`;
    if (host > 0) {
      throw new TypeError(
        `${where}: the call mixes cpu and GPU tensors; pass all of them on the CPU or all on ${this.#device}`,
      );
    }
    const stray = tensors.find((t) => t.device !== this.#device);
    if (stray) {
      throw new TypeError(
        `${where}: a tensor is on ${stray.device}, but this rank's GPU is ${this.#device} ` +
          '(its NCCL communicator is bound to that GPU); move it there with .to()',
      );
    }
    return true;
  }

  /** On NCCL when the tensors are on the GPU, else on the store; never throws synchronously. */
  async #run(
    call: CallInfo,
    op: string,
    tensors: readonly Tensor[],
    onHost: () => Promise<void>,
    onGpu: () => DeviceOp,
  ): Promise<void> {
    if (!this.#onGpu(op, tensors)) return onHost();
    return this.#queue.submit(call, op, onGpu());
  }

  allReduce(call: CallInfo, tensor: Tensor, op: Reduction): Promise<void> {
    return this.#run(
      call,
      'allReduce',
      [tensor],
      () => this.#fallback.allReduce(call, tensor, op),
      () => ops.allReduce(tensor, ncclReduction(op, tensor.dtype, 'allReduce')),
    );
  }

  broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void> {
    return this.#run(
      call,
      'broadcast',
      [tensor],
      () => this.#fallback.broadcast(call, tensor, src),
      () => ops.broadcast(tensor, src),
    );
  }

  reduce(call: CallInfo, tensor: Tensor, dst: number, op: Reduction): Promise<void> {
    return this.#run(
      call,
      'reduce',
      [tensor],
      () => this.#fallback.reduce(call, tensor, dst, op),
      () => ops.reduce(tensor, dst, ncclReduction(op, tensor.dtype, 'reduce')),
    );
  }

  allGather(call: CallInfo, outputs: readonly Tensor[], input: Tensor): Promise<void> {
    return this.#run(
      call,
      'allGather',
      [input, ...outputs],
      () => this.#fallback.allGather(call, outputs, input),
      () => ops.allGather(outputs, input, this.#place),
    );
  }

  allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void> {
    return this.#run(
      call,
      'allGatherInto',
      [output, input],
      () => this.#fallback.allGatherInto(call, output, input),
      () => ops.allGatherInto(output, input),
    );
  }

  reduceScatter(call: CallInfo, output: Tensor, inputs: readonly Tensor[], op: Reduction): Promise<void> {
    return this.#run(
      call,
      'reduceScatter',
      [output, ...inputs],
      () => this.#fallback.reduceScatter(call, output, inputs, op),
      () => ops.reduceScatter(output, inputs, ncclReduction(op, output.dtype, 'reduceScatter'), this.#place),
    );
  }

  reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: Reduction): Promise<void> {
    return this.#run(
      call,
      'reduceScatterTensor',
      [output, input],
      () => this.#fallback.reduceScatterTensor(call, output, input, op),
      () => ops.reduceScatterTensor(output, input, ncclReduction(op, output.dtype, 'reduceScatterTensor')),
    );
  }

  allToAll(call: CallInfo, outputs: readonly Tensor[], inputs: readonly Tensor[]): Promise<void> {
    return this.#run(
      call,
      'allToAll',
      [...outputs, ...inputs],
      () => this.#fallback.allToAll(call, outputs, inputs),
      () => ops.allToAll(outputs, inputs, this.#place),
    );
  }

  allToAllSingle(
    call: CallInfo,
    output: Tensor,
    input: Tensor,
    outputSplits: readonly number[],
    inputSplits: readonly number[],
  ): Promise<void> {
    return this.#run(
      call,
      'allToAllSingle',
      [output, input],
      () => this.#fallback.allToAllSingle(call, output, input, outputSplits, inputSplits),
      () => ops.allToAllSingle(output, input, outputSplits, inputSplits, this.#place),
    );
  }

  gather(
    call: CallInfo,
    tensor: Tensor,
    dst: number,
    gatherList: readonly Tensor[] | undefined,
  ): Promise<void> {
    return this.#run(
      call,
      'gather',
      [tensor, ...(gatherList ?? [])],
      () => this.#fallback.gather(call, tensor, dst, gatherList),
      () => ops.gather(tensor, dst, gatherList, this.#place),
    );
  }

  scatter(
    call: CallInfo,
    tensor: Tensor,
    src: number,
    scatterList: readonly Tensor[] | undefined,
  ): Promise<void> {
    return this.#run(
      call,
      'scatter',
      [tensor, ...(scatterList ?? [])],
      () => this.#fallback.scatter(call, tensor, src, scatterList),
      () => ops.scatter(tensor, src, scatterList, this.#place),
    );
  }

  /** On NCCL, as torch's NCCL barrier: a group with a GPU each synchronises there. */
  async barrier(call: CallInfo): Promise<void> {
    return this.#queue.submit(call, 'barrier', ops.barrier(this.#place));
  }

  /** On the store, as torch runs monitored_barrier on gloo only: it names missing ranks, which NCCL cannot. */
  monitoredBarrier(call: CallInfo, waitAllRanks: boolean): Promise<void> {
    return this.#fallback.monitoredBarrier(call, waitAllRanks);
  }

  send(call: CallInfo, tensor: Tensor, dst: number, tag: number): Promise<void> {
    return this.#run(
      call,
      'send',
      [tensor],
      () => this.#fallback.send(call, tensor, dst, tag),
      () => ops.send(tensor, dst),
    );
  }

  /** GPU messages between two ranks arrive in the order sent; NCCL has no tags, so `tag` is not matched. */
  recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    return this.#run(
      call,
      'recv',
      [tensor],
      () => this.#fallback.recv(call, tensor, src, tag),
      () => ops.recv(tensor, src),
    );
  }

  override get runsBatches(): boolean {
    return true;
  }

  /**
   * The GPU sends and receives of one batchIsendIrecv as one NCCL group on
   * the group's communicator (so a ring exchange cannot deadlock); CPU ones
   * go to the store one by one.
   */
  override batch(entries: readonly BatchedP2P[]): Array<Promise<void>> {
    const outcomes: Array<Promise<void>> = [];
    const onGpu: Array<{ entry: BatchedP2P; index: number }> = [];
    entries.forEach((entry, index) => {
      const { kind, call, tensor, peer, tag } = entry;
      try {
        if (this.#onGpu(`batchIsendIrecv ${kind}`, [tensor])) {
          onGpu.push({ entry, index });
          return;
        }
        outcomes[index] =
          kind === 'send'
            ? this.#fallback.send(call, tensor, peer, tag)
            : this.#fallback.recv(call, tensor, peer, tag);
      } catch (error) {
        outcomes[index] = Promise.reject(error);
      }
    });
    if (onGpu.length > 0) {
      const transfers = onGpu.map(({ entry }) => ({
        kind: entry.kind,
        peer: entry.peer,
        tensor: entry.tensor,
        offset: 0,
        bytes: entry.tensor.nbytes,
      }));
      const done = this.#queue.submit(onGpu[0].entry.call, 'batchIsendIrecv', ops.transfers(transfers));
      for (const { index } of onGpu) outcomes[index] = done;
    }
    return outcomes;
  }

  recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor> {
    return this.#fallback.recvAny(call, src, tag);
  }

  /** CPU tensors only: NCCL has no receive from any source (nor has torch's NCCL backend). */
  async recvFromAny(call: CallInfo, tensor: Tensor, tag: number): Promise<number> {
    if (this.#onGpu('recvFromAny', [tensor])) {
      throw new TypeError(
        `recvFromAny on group "${this.#group.name}": NCCL has no receive from any source, so a GPU tensor ` +
          'cannot be received this way on a group on distinct GPUs; receive it with recv(tensor, src), or pass a CPU tensor',
      );
    }
    return this.#fallback.recvFromAny(call, tensor, tag);
  }

  gatherAny(call: CallInfo, tensor: Tensor, dst: number): Promise<Tensor[] | undefined> {
    return this.#fallback.gatherAny(call, tensor, dst);
  }

  scatterAny(call: CallInfo, tensors: readonly Tensor[] | undefined, src: number): Promise<Tensor> {
    return this.#fallback.scatterAny(call, tensors, src);
  }

  broadcastAny(call: CallInfo, tensor: Tensor | undefined, src: number): Promise<Tensor> {
    return this.#fallback.broadcastAny(call, tensor, src);
  }

  allGatherAny(call: CallInfo, tensor: Tensor): Promise<Tensor[]> {
    return this.#fallback.allGatherAny(call, tensor);
  }

  abandon(call: CallInfo, pattern: ArrivalPattern, error: Error): Promise<void> {
    return this.#fallback.abandon(call, pattern, error);
  }

  /** Finalizes and destroys the communicator (aborts it if it is unhealthy), then the stream and events. */
  destroy(): void {
    this.#queue.destroy(this.#destroyTimeoutMs);
    this.#fallback.destroy();
  }
}
