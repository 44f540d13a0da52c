/**
 * TaskBackend: every ThreadGroup call of a group whose members all run as
 * async tasks of this thread (spawnThreads' `threads: 1`). Members meet
 * through promises, never through shared-memory waits, which would block the
 * thread the peers they wait for run on: a collective's last member does the
 * call for all (meeting.ts, task-collectives.ts), a send leaves a copy for its
 * receiver (task-p2p.ts). Calls are compared by signature as the store
 * backend compares them, so a mismatch fails with CollectiveMismatchError,
 * and a member that never comes shows in a timeout naming it.
 */
import type { AbortWord } from '../../runtime/abort-word.ts';
import { CommTimeoutError } from '../../runtime/errors.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import {
  type ArrivalPattern,
  Backend,
  type CallInfo,
  COMPLETED,
  type GroupView,
  MONITORED_BARRIER_ROOT,
} from '../backend.ts';
import type { Reduction } from '../reduction.ts';
import { callWhere } from '../store-backend/call-failure.ts';
import { notPassedVerdict, reportedByRoot, verdictTimeoutMs } from '../store-backend/monitored-barrier.ts';
import { type GroupHub, joinHub, leaveHub } from './group-hub.ts';
import type { ArriveOptions, Complete, Failure } from './meeting.ts';
import * as collectives from './task-collectives.ts';
import { land, messageTensor, type Receiver } from './task-p2p.ts';

export class TaskBackend extends Backend {
  readonly backendName = 'TaskBackend';
  readonly #group: GroupView;
  readonly #hub: GroupHub;
  readonly #options: ArriveOptions;
  #destroyed = false;

  /** `abort`: the job's abort word, which every wait of the group's calls ends with. */
  constructor(group: GroupView, abort: AbortWord | undefined) {
    super();
    this.#group = group;
    this.#hub = joinHub(group.id, group.size);
    this.#options = { abort };
  }

  #meet<A, R = void>(call: CallInfo, args: A, complete: Complete<A, R>, options = this.#options): Promise<R> {
    return this.#hub.meeting(call.seq).arrive({ group: this.#group, call, args }, complete, options);
  }

  allReduce(call: CallInfo, tensor: Tensor, op: Reduction): Promise<void> {
    return this.#meet(call, { tensor, op }, collectives.allReduce);
  }

  broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void> {
    return this.#meet(call, { tensor, src }, collectives.broadcast);
  }

  reduce(call: CallInfo, tensor: Tensor, dst: number, op: Reduction): Promise<void> {
    return this.#meet(call, { tensor, dst, op }, collectives.reduce);
  }

  allGather(call: CallInfo, outputs: readonly Tensor[], input: Tensor): Promise<void> {
    return this.#meet(call, { outputs, input }, collectives.allGather);
  }

  allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void> {
    return this.#meet(call, { output, input }, collectives.allGatherInto);
  }

  reduceScatter(call: CallInfo, output: Tensor, inputs: readonly Tensor[], op: Reduction): Promise<void> {
    return this.#meet(call, { output, inputs, op }, collectives.reduceScatter);
  }

  reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: Reduction): Promise<void> {
    const parts = collectives.scatterSlices(output, input, this.#group.size);
    return this.#meet(call, { ...parts, op }, collectives.reduceScatter);
  }

  allToAll(call: CallInfo, outputs: readonly Tensor[], inputs: readonly Tensor[]): Promise<void> {
    return this.#meet(call, { outputs, inputs }, collectives.allToAll);
  }

  allToAllSingle(
    call: CallInfo,
    output: Tensor,
    input: Tensor,
    outputSplits: readonly number[],
    inputSplits: readonly number[],
  ): Promise<void> {
    const lists = collectives.splitLists(output, input, outputSplits, inputSplits);
    return this.#meet(call, lists, collectives.allToAll);
  }

  gather(call: CallInfo, tensor: Tensor, dst: number, list: readonly Tensor[] | undefined): Promise<void> {
    return this.#meet(call, { tensor, dst, list }, collectives.gather);
  }

  scatter(call: CallInfo, tensor: Tensor, src: number, list: readonly Tensor[] | undefined): Promise<void> {
    return this.#meet(call, { tensor, src, list }, collectives.scatter);
  }

  barrier(call: CallInfo): Promise<void> {
    return this.#meet(call, null, collectives.barrier);
  }

  /**
   * Group rank 0 waits `call.timeoutMs` for the others, which wait for its verdict as long as the store
   * backend's do (verdictTimeoutMs); when it runs out, it names the ranks that did not come (the first,
   * or all with `waitAllRanks`), and those that came fail with its answer.
   */
  monitoredBarrier(call: CallInfo, waitAllRanks: boolean): Promise<void> {
    const root = this.#group.rank === MONITORED_BARRIER_ROOT;
    const waitMs = root ? call.timeoutMs : verdictTimeoutMs(call.timeoutMs);
    const timedOut = (_: unknown, missing: readonly number[]): Failure => {
      const named = waitAllRanks ? missing : missing.slice(0, 1);
      const verdict = notPassedVerdict(
        named,
        named.map((p) => this.#group.ranks[p]),
        call.timeoutMs,
      );
      return (m) => {
        const where = callWhere(m.call, m.group);
        return new CommTimeoutError(
          m.group.rank === MONITORED_BARRIER_ROOT
            ? `${where}: ${verdict}`
            : reportedByRoot(where, m.group.ranks[m.group.rank], verdict),
        );
      };
    };
    const options = { ...this.#options, waitMs, timedOut: root ? timedOut : undefined };
    return this.#meet(call, null, collectives.barrier, options);
  }

  send(_call: CallInfo, tensor: Tensor, dst: number, tag: number): Promise<void> {
    this.#hub.mailboxes.send(this.#group.rank, dst, tag, tensor);
    return COMPLETED;
  }

  #receiver(call: CallInfo): Receiver {
    return { group: this.#group, call, abort: this.#options.abort };
  }

  #receive(call: CallInfo, src: number | undefined, tag: number) {
    return this.#hub.mailboxes.receive(this.#receiver(call), this.#group.rank, tag, src);
  }

  async recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    land(this.#receiver(call), await this.#receive(call, src, tag), tensor);
  }

  async recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor> {
    return messageTensor(this.#receiver(call), await this.#receive(call, src, tag));
  }

  async recvFromAny(call: CallInfo, tensor: Tensor, tag: number): Promise<number> {
    return land(this.#receiver(call), await this.#receive(call, undefined, tag), tensor);
  }

  broadcastAny(call: CallInfo, tensor: Tensor | undefined, src: number): Promise<Tensor> {
    return this.#meet(call, { tensor, src }, collectives.broadcastAny);
  }

  allGatherAny(call: CallInfo, tensor: Tensor): Promise<Tensor[]> {
    return this.#meet(call, tensor, collectives.allGatherAny);
  }

  gatherAny(call: CallInfo, tensor: Tensor, dst: number): Promise<Tensor[] | undefined> {
    return this.#meet(call, { tensor, dst }, collectives.gatherAny);
  }

  scatterAny(call: CallInfo, tensors: readonly Tensor[] | undefined, src: number): Promise<Tensor> {
    return this.#meet(call, { tensors, src }, collectives.scatterAny);
  }

  /** A call that failed this member's checks: the members it meets fail naming it, instead of waiting. */
  async abandon(call: CallInfo, pattern: ArrivalPattern, error: Error): Promise<void> {
    const { mailboxes } = this.#hub;
    const rank = this.#group.rank;
    if (pattern.kind === 'send') mailboxes.sendFailure(rank, pattern.peer, pattern.tag, error);
    else if (pattern.kind === 'recv') mailboxes.dropNext(pattern.peer, rank, pattern.tag);
    else if (call.seq >= 0) this.#hub.meeting(call.seq).abandon(this.#group, error);
  }

  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    leaveHub(this.#group.id, this.#hub);
  }
}
