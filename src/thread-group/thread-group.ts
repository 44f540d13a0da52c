/**
 * ThreadGroup: the torch.distributed-style collective API over a Backend.
 * Ranks and roots are group ranks. Every call checks its arguments
 * (argument-checks.ts), signs itself (call-signatures.ts), takes the group's
 * next sequence number (collectives must be issued in the same order on
 * every member, as in torch) and returns a Work; several Works may be
 * outstanding at once. Where the rank's debugging monitor tracks calls,
 * call-tracker.ts records them.
 */
import { callName } from '../debug/call-record.ts';
import { rankMonitor } from '../debug/monitor.ts';
import { rankClock } from '../predict/rank-clock.ts';
import { runErrand } from '../runtime/errands.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { rankFaults } from '../runtime/faults/injector.ts';
import { trackCall, Work } from '../runtime/work.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { assertCommTensor, assertHostTensors, isCommTensor } from '../tensor/validate.ts';
import {
  allToAllSplits,
  checkAllToAll,
  checkGroupRank,
  checkLendsViews,
  checkOwnRows,
  checkPeer,
  checkReduceScatter,
  checkRootOnly,
  checkRowsAlike,
  checkTag,
  checkTensorList,
  checkWhole,
} from './argument-checks.ts';
import {
  type Backend,
  type BatchedP2P,
  type BorrowedTensor,
  type BorrowedViews,
  type CallInfo,
  valueWhenDone,
} from './backend.ts';
import {
  allReduceSigned,
  BARRIER_SIGNED,
  broadcastSigned,
  recvSigned,
  reduceSigned,
  sendSigned,
  sharesOf,
  tagText,
} from './call-signatures.ts';
import { CallTracker, type TrackedCall } from './call-tracker.ts';
import { withFaults } from './fault-hook.ts';
import { membersByNode } from './group-nodes.ts';
import { objectToTensor, tensorToObject } from './object-bytes.ts';
import { OPS, type OpName, type OpSpec, type RawRoles } from './ops.ts';
import {
  type ClockExchange,
  GroupPrediction,
  type PostedCollective,
  type PostedSend,
} from './predicted-calls.ts';
import { RecentSignature, type Signed } from './recent-signatures.ts';
import { type CollectiveReduceOp, checkReduction, type Reduction, reductionName } from './reduction.ts';
import { settledWithin, UnfinishedCalls } from './unfinished-calls.ts';

export interface CallOptions {
  timeoutMs?: number;
}
export interface ReduceOptions extends CallOptions {
  op?: CollectiveReduceOp;
  /** premulSum only: what this rank's inputs are multiplied by before the sum (a float, in the tensors' dtype). */
  factor?: number;
}

export interface MonitoredBarrierOptions {
  /** How long group rank 0 waits for every other rank (default: the group's timeout). */
  timeoutMs?: number;
  /** Name every rank that did not arrive, not only the first (torch's wait_all_ranks). */
  waitAllRanks?: boolean;
}
export interface P2POptions extends CallOptions {
  tag?: number;
}

export interface P2POp {
  op: 'isend' | 'irecv';
  tensor: Tensor;
  peer: number;
  tag?: number;
}

export interface GroupInfo {
  /** Key prefix unique within the job. */
  id: string;
  /** Human-readable name used in messages. */
  name: string;
  /** Global ranks of the members, in group-rank order. */
  ranks: readonly number[];
  /** This rank's group rank, or -1 when it is not a member. */
  rank: number;
  /** This rank's global rank. */
  globalRank: number;
  timeoutMs: number;
  /** How often its calls' slow waits look at their peers (CallDebug.peerCheckMs); PEER_CHECK_MS by default. */
  peerCheckMs?: number;
  /** Each member's node index (group-nodes.ts), by group rank; absent where every member is on node 0. */
  nodes?: readonly number[];
  /**
   * In predict mode: where members exchange their virtual clocks.
   * @internal
   */
  predictExchange?: ClockExchange;
}

export class ThreadGroup {
  readonly #info: GroupInfo;
  readonly #backend: Backend | undefined;
  /** Where the rank's debugging monitor tracks calls (not outside a rank context, nor where it is off). */
  readonly #tracker: CallTracker | undefined;
  readonly #checks: boolean;
  /** In predict mode (a member of a job that predicts): the calls' predicted times. */
  readonly #prediction: GroupPrediction | undefined;
  #seq = 0;
  #destroyed = false;
  readonly #unfinished = new UnfinishedCalls();
  readonly #wheres = new Map<OpName, string>();
  readonly #recent = {
    allReduce: new RecentSignature(),
    broadcast: new RecentSignature(),
    reduce: new RecentSignature(),
    send: new RecentSignature(),
    recv: new RecentSignature(),
  };

  /** @internal A group is made by its rank's context (ctx.world, newGroup, the manager), never by users. */
  constructor(info: GroupInfo, backend: Backend | undefined) {
    this.#info = info;
    this.#backend = backend;
    const monitor = backend ? rankMonitor() : undefined;
    this.#checks = monitor?.options.checks ?? true;
    this.#tracker = monitor?.tracksCalls ? new CallTracker(monitor, info) : undefined;
    const clock = rankClock();
    this.#prediction =
      clock && info.predictExchange ? new GroupPrediction(clock, info.predictExchange, info) : undefined;
  }

  get rank(): number {
    return this.#info.rank;
  }
  get size(): number {
    return this.#info.ranks.length;
  }
  get ranks(): readonly number[] {
    return this.#info.ranks;
  }
  get name(): string {
    return this.#info.name;
  }
  get isMember(): boolean {
    return this.#info.rank >= 0;
  }

  /**
   * The node group rank `groupRank` runs on: its index among the job's nodes
   * (0-based, in order of the nodes' lowest global ranks), the same index in
   * every group. Ranks share a node when the same `tensorcomm run` started
   * them, or when they report the same node id (TENSORCOMM_NODE_ID, else
   * SLURM_NODEID, else the host name); thread ranks are all on node 0.
   */
  nodeOf(groupRank: number): number {
    checkGroupRank(this, groupRank, 'rank', 'nodeOf');
    return this.#info.nodes?.[groupRank] ?? 0;
  }

  /**
   * The members of each node the group spans, as group ranks (ascending), the
   * nodes in the order of their nodeOf index. Only nodes holding members are
   * listed, so the i-th list is node i only where the group spans every node.
   */
  nodes(): number[][] {
    return membersByNode(this.#info.nodes ?? this.#info.ranks.map(() => 0));
  }

  /**
   * Memory the members on one node map in common, for a layer that hands
   * data to several ranks of a node at one copy each (weight sync's relay):
   * `bytes` zero-filled bytes under `key`, made by member `owner` when it
   * asks, and mapped by the members on its node that ask after it. Undefined
   * for another member's memory while that member has not made it, for an
   * owner on another node, and where the group's ranks share no such memory
   * (rank threads, whose tensors are common memory already; NCCL groups).
   * What this rank mapped is unmapped when the group is destroyed, and the
   * owner's is then removed. The bytes are the caller's protocol: the group
   * orders nothing in them.
   */
  nodeMemory(key: string, owner: number, bytes: number): Uint8Array | undefined {
    const where = 'nodeMemory';
    if (this.#destroyed) throw new InvalidStateError(`${where}: the group was destroyed`);
    checkGroupRank(this, owner, 'owner', where);
    if (!Number.isSafeInteger(bytes) || bytes < 1)
      throw new RangeError(`${where}: bytes must be a positive integer, got ${bytes}`);
    return this.#backend?.nodeMemory(key, owner, bytes);
  }

  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Numbers a call, runs its local checks and hands it to the backend. A call
   * that fails its checks still takes its number and tells its peers (through
   * `abandon`), so they fail with this rank's error instead of waiting. `run`
   * returns the call's value itself when the backend completed it at once
   * (see COMPLETED): its Work is then settled as it is returned, without a
   * promise turn.
   */
  #call<T>(
    spec: OpSpec,
    options: (CallOptions & RawRoles) | undefined,
    check: () => Signed,
    run: (backend: Backend, call: CallInfo) => T | Promise<T>,
  ): Work<T> {
    const op = spec.name;
    const backend = this.#backend;
    const timeoutMs = options?.timeoutMs ?? this.#info.timeoutMs;
    if (this.#destroyed || !backend || !this.isMember || !(timeoutMs > 0))
      return this.#refused(op, timeoutMs);
    // Faults the job injects (spawnThreads' `faults`, `chaos`) into this rank's calls; none without them.
    if (rankFaults() !== undefined) {
      const injected = withFaults(op, this.#where(op), check, run);
      if (injected) [check, run] = injected;
    }
    // Point-to-point calls are matched per stream, not by the group's collective order.
    const seq = spec.p2p ? -1 : this.#seq++;
    const checks = this.#checks;
    let signed: Signed;
    try {
      signed = check();
    } catch (error) {
      if (seq >= 0) this.#tracker?.failedToStart(seq, op, error);
      const call: CallInfo = { seq, signature: op, timeoutMs, checks };
      // With fingerprints on, every collective's first exchange is every rank to every rank.
      const pattern =
        spec.arrival(options ?? {}, this.size) ??
        (checks && !spec.p2p ? { kind: 'all' as const } : undefined);
      const where = this.#where(op);
      // The call rejects at once; its peers are told in the background (bounded inside abandon), and the
      // rank's close waits for that, so a rank that returns right away cannot cut the message short.
      if (pattern) runErrand(backend.abandon(call, pattern, error as Error));
      return this.#rejected(where, error);
    }
    const debug = this.#tracker?.track(spec, seq, signed, options);
    const prediction = this.#prediction?.active ? this.#prediction : undefined;
    // A collective's clock and a send's stamp are posted before the call is issued (see GroupPrediction).
    const posted = prediction && this.#posted(prediction, spec, signed, options);
    let outcome: T | Promise<T>;
    try {
      outcome = run(backend, { seq, signature: signed.signature, timeoutMs, checks, debug });
    } catch (error) {
      outcome = Promise.reject(error);
    }
    // The ledger's description is made only when a report needs it (a settled call's too: a then() on its
    // Work whose callback throws is reported under it); closures stay anonymous (no keepNames wrapper per call).
    const describe = debug
      ? () => debug.describe(this.#callName(signed, seq))
      : () => this.#callName(signed, seq);
    if (prediction) {
      return trackCall(this.#predicted(prediction, spec, seq, options, outcome, debug, posted), describe);
    }
    if (!(outcome instanceof Promise)) {
      debug?.endedAtOnce();
      return trackCall(Work.resolved(outcome), describe);
    }
    debug?.running();
    // Point-to-point calls are not in the collective order a barrier keeps: a receive may be posted long
    // before its message (as gloo's barrier waits for queued collectives, not for sends and receives).
    // Counted from when the backend starts it (a call held back by an injected delay starts later, in order),
    // without looking at the Work: whether the caller observes it is the caller's business.
    if (!spec.p2p) this.#unfinished.add(outcome);
    return trackCall(new Work(debug ? debug.watch(outcome) : outcome), describe);
  }

  /** A call in predict mode: tracked as any other, its Work carrying its predicted times (predicted-calls.ts). */
  #predicted<T>(
    prediction: GroupPrediction,
    spec: OpSpec,
    seq: number,
    roles: RawRoles | undefined,
    outcome: T | Promise<T>,
    debug: TrackedCall | undefined,
    posted: PostedCollective | PostedSend | undefined,
  ): Work<T> {
    let watched = outcome;
    if (outcome instanceof Promise) {
      debug?.running();
      if (debug) watched = debug.watch(outcome);
      if (!spec.p2p) this.#unfinished.add(outcome);
    } else debug?.endedAtOnce();
    if (!spec.p2p) return prediction.collective(spec.name, seq, posted as PostedCollective, watched);
    if (posted) return prediction.send(spec.name, posted as PostedSend, watched);
    return prediction.recv(spec.name, roles?.src as number | undefined, p2pTag(roles), watched);
  }

  /** What a call posts in predict mode before it is issued: a collective's clock, a send's stamp; nothing for a receive. */
  #posted(
    prediction: GroupPrediction,
    spec: OpSpec,
    signed: Signed,
    roles: RawRoles | undefined,
  ): PostedCollective | PostedSend | undefined {
    if (!spec.p2p) return prediction.post(signed.bytes);
    if (spec.peerRole === 'dst')
      return prediction.postSend(roles?.dst as number, p2pTag(roles), signed.bytes);
    return undefined;
  }

  #callName(signed: Signed, seq: number): string {
    return callName({ call: signed.label ?? signed.signature, seq, group: this.name });
  }

  /** A call refused before it was numbered: the group was destroyed, this rank is no member, or its timeout is not positive. */
  #refused<T>(op: OpName, timeoutMs: number): Work<T> {
    const where = this.#where(op);
    if (this.#destroyed)
      return this.#rejected(where, new InvalidStateError(`${where}: the group was destroyed`));
    if (!this.#backend || !this.isMember) {
      return this.#rejected(
        where,
        new InvalidStateError(
          `${where}: rank ${this.#info.globalRank} is not a member (members: ${this.ranks.join(', ')})`,
        ),
      );
    }
    return this.#rejected(where, new RangeError(`${where}: timeoutMs must be positive, got ${timeoutMs}`));
  }

  /** "allReduce on group \"world\"": what a call's errors and ledger entries start with, made once per op. */
  #where(op: OpName): string {
    let where = this.#wheres.get(op);
    if (where === undefined) {
      where = `${op} on group "${this.name}"`;
      this.#wheres.set(op, where);
    }
    return where;
  }

  /** A call refused before it was numbered: the rank's ledger still holds it until someone looks. */
  #rejected<T>(where: string, error: unknown): Work<T> {
    return trackCall(Work.rejected<T>(error), () => where);
  }

  allReduce(tensor: Tensor, options?: ReduceOptions): Work<Tensor> {
    let reduction: Reduction;
    return this.#call(
      OPS.allReduce,
      options,
      () => {
        assertCommTensor(tensor, 'allReduce');
        reduction = checkReduction(options, tensor.dtype, 'allReduce');
        return this.#recent.allReduce.signed(tensor, reductionName(reduction), '', allReduceSigned);
      },
      (b, call) => valueWhenDone(b.allReduce(call, tensor, reduction), tensor),
    );
  }

  broadcast(tensor: Tensor, options: { src: number } & CallOptions): Work<Tensor> {
    return this.#call(
      OPS.broadcast,
      options,
      () => {
        assertCommTensor(tensor, 'broadcast');
        const src = checkGroupRank(this, options?.src, 'src', 'broadcast');
        return this.#recent.broadcast.signed(tensor, src, '', broadcastSigned);
      },
      async (b, call) => {
        await b.broadcast(call, tensor, options.src);
        return tensor;
      },
    );
  }

  reduce(tensor: Tensor, options: { dst: number } & ReduceOptions): Work<Tensor> {
    let reduction: Reduction;
    return this.#call(
      OPS.reduce,
      options,
      () => {
        assertCommTensor(tensor, 'reduce');
        const dst = checkGroupRank(this, options?.dst, 'dst', 'reduce');
        reduction = checkReduction(options, tensor.dtype, 'reduce');
        return this.#recent.reduce.signed(tensor, dst, reductionName(reduction), reduceSigned);
      },
      async (b, call) => {
        await b.reduce(call, tensor, options.dst, reduction);
        return tensor;
      },
    );
  }

  allGather(outputs: Tensor[], input: Tensor, options?: CallOptions): Work<Tensor[]> {
    return this.#call(
      OPS.allGather,
      options,
      () => {
        assertCommTensor(input, 'allGather: input');
        checkTensorList(this, outputs, 'allGather', 'outputs', input);
        return {
          signature: `allGather(${input.describe()})`,
          bytes: input.nbytes * this.size,
        };
      },
      async (b, call) => {
        await b.allGather(call, outputs, input);
        return outputs;
      },
    );
  }

  allGatherInto(output: Tensor, input: Tensor, options?: CallOptions): Work<Tensor> {
    return this.#call(
      OPS.allGatherInto,
      options,
      () => {
        checkWhole(
          this,
          'allGatherInto',
          { name: 'output', tensor: output },
          { name: 'input', tensor: input },
        );
        return {
          signature: `allGatherInto(${input.describe()})`,
          bytes: output.nbytes,
        };
      },
      async (b, call) => {
        await b.allGatherInto(call, output, input);
        return output;
      },
    );
  }

  /**
   * inputs[p] is this rank's share of rank p's output, so it has the shape of
   * rank p's output: shares may differ in size between ranks (an uneven
   * reduce-scatter), as long as every rank passes the same shapes.
   */
  reduceScatter(output: Tensor, inputs: Tensor[], options?: ReduceOptions): Work<Tensor> {
    let reduction: Reduction;
    return this.#call(
      OPS.reduceScatter,
      options,
      () => {
        checkReduceScatter(this, output, inputs);
        reduction = checkReduction(options, output.dtype, 'reduceScatter');
        return {
          signature: `reduceScatter(${sharesOf(inputs)}, ${reductionName(reduction)})`,
          bytes: inputs.reduce((sum, t) => sum + t.nbytes, 0),
        };
      },
      async (b, call) => {
        await b.reduceScatter(call, output, inputs, reduction);
        return output;
      },
    );
  }

  reduceScatterTensor(output: Tensor, input: Tensor, options?: ReduceOptions): Work<Tensor> {
    let reduction: Reduction;
    return this.#call(
      OPS.reduceScatterTensor,
      options,
      () => {
        checkWhole(
          this,
          'reduceScatterTensor',
          { name: 'input', tensor: input },
          { name: 'output', tensor: output },
        );
        reduction = checkReduction(options, output.dtype, 'reduceScatterTensor');
        return {
          signature: `reduceScatterTensor(${input.describe()}, ${reductionName(reduction)})`,
          bytes: input.nbytes,
        };
      },
      async (b, call) => {
        await b.reduceScatterTensor(call, output, input, reduction);
        return output;
      },
    );
  }

  allToAll(outputs: Tensor[], inputs: Tensor[], options?: CallOptions): Work<Tensor[]> {
    return this.#call(
      OPS.allToAll,
      options,
      () => {
        checkAllToAll(this, outputs, inputs);
        return {
          signature: `allToAll(${inputs[0].dtype})`,
          bytes: inputs.reduce((sum, t) => sum + t.nbytes, 0),
        };
      },
      async (b, call) => {
        await b.allToAll(call, outputs, inputs);
        return outputs;
      },
    );
  }

  allToAllSingle(
    output: Tensor,
    input: Tensor,
    options?: { outputSplits?: number[]; inputSplits?: number[] } & CallOptions,
  ): Work<Tensor> {
    let outputSplits: number[] = [];
    let inputSplits: number[] = [];
    return this.#call(
      OPS.allToAllSingle,
      options,
      () => {
        const rest = checkRowsAlike(output, input);
        inputSplits = allToAllSplits(this, options?.inputSplits, input, 'inputSplits');
        outputSplits = allToAllSplits(this, options?.outputSplits, output, 'outputSplits');
        checkOwnRows(this, inputSplits, outputSplits);
        return {
          signature: `allToAllSingle(${input.dtype}[*,${rest}])`,
          bytes: input.nbytes,
        };
      },
      async (b, call) => {
        await b.allToAllSingle(call, output, input, outputSplits, inputSplits);
        return output;
      },
    );
  }

  gather(
    tensor: Tensor,
    options: { dst: number; gatherList?: Tensor[] } & CallOptions,
  ): Work<Tensor[] | undefined> {
    return this.#call(
      OPS.gather,
      options,
      () => {
        assertCommTensor(tensor, 'gather');
        const dst = checkGroupRank(this, options?.dst, 'dst', 'gather');
        if (this.rank === dst) checkTensorList(this, options.gatherList, 'gather', 'gatherList', tensor);
        else checkRootOnly(this, options.gatherList, 'gather', 'gatherList', `dst is ${dst}`);
        return {
          signature: `gather(${tensor.describe()}, dst=${dst})`,
          bytes: tensor.nbytes * this.size,
        };
      },
      async (b, call) => {
        const list = this.rank === options.dst ? options.gatherList : undefined;
        await b.gather(call, tensor, options.dst, list);
        return list;
      },
    );
  }

  scatter(tensor: Tensor, options: { src: number; scatterList?: Tensor[] } & CallOptions): Work<Tensor> {
    return this.#call(
      OPS.scatter,
      options,
      () => {
        assertCommTensor(tensor, 'scatter');
        const src = checkGroupRank(this, options?.src, 'src', 'scatter');
        if (this.rank === src) checkTensorList(this, options.scatterList, 'scatter', 'scatterList', tensor);
        else checkRootOnly(this, options.scatterList, 'scatter', 'scatterList', `src is ${src}`);
        return {
          signature: `scatter(${tensor.describe()}, src=${src})`,
          bytes: tensor.nbytes * this.size,
        };
      },
      async (b, call) => {
        await b.scatter(
          call,
          tensor,
          options.src,
          this.rank === options.src ? options.scatterList : undefined,
        );
        return tensor;
      },
    );
  }

  /**
   * Completes once every member reached it and every earlier collective this
   * rank made on the group has completed (torch's gloo semantics: a barrier
   * implies the earlier work is done). Sends and receives are not waited for:
   * a message may legitimately arrive after the barrier (an irecv posted
   * early, an isend whose receiver is still before its barrier), as with
   * gloo. An earlier call that failed reports that through its own Work.
   */
  barrier(options?: CallOptions): Work<void> {
    let earlier: readonly Promise<unknown>[] = [];
    return this.#call(
      OPS.barrier,
      options,
      () => {
        // Taken as the call is made: before it is counted among them, and before an injected delay
        // holds its run back (which would then wait for itself).
        earlier = this.#unfinished.current();
        return BARRIER_SIGNED;
      },
      (b, call) => {
        if (earlier.length === 0) return valueWhenDone(b.barrier(call), undefined);
        return settledWithin(earlier, call.timeoutMs, () => {
          const me = `rank ${this.#info.globalRank}`;
          return `barrier() call #${call.seq} on group "${this.name}": ${me} timed out after ${call.timeoutMs} ms waiting for its ${earlier.length} earlier call(s) on the group to complete`;
        }).then(() => b.barrier(call));
      },
    );
  }

  /**
   * torch's monitored_barrier: group rank 0 waits up to `timeoutMs` for each
   * other rank and fails naming the first that did not arrive ("rank 1 failed
   * to pass monitoredBarrier"), or all of them with `waitAllRanks`; the ranks
   * that arrived fail with its answer. Unlike barrier it does not wait for
   * earlier calls: one stuck on the missing rank would hide it.
   */
  monitoredBarrier(options?: MonitoredBarrierOptions): Work<void> {
    return this.#call(
      OPS.monitoredBarrier,
      options,
      () => {
        const all = options?.waitAllRanks;
        if (all !== undefined && typeof all !== 'boolean') {
          throw new TypeError(`monitoredBarrier: waitAllRanks must be a boolean, got ${String(all)}`);
        }
        return { signature: 'monitoredBarrier()', bytes: 0 };
      },
      (b, call) => b.monitoredBarrier(call, options?.waitAllRanks === true),
    );
  }

  send(tensor: Tensor, dst: number, options?: P2POptions): Work<void> {
    const ticket = this.#sendEarly(tensor, dst, options);
    return this.#p2p('send', tensor, dst, options, (b, call) =>
      valueWhenDone(
        ticket === 0 ? b.send(call, tensor, dst, options?.tag ?? 0) : b.awaitEarlySend(call, dst, ticket),
        undefined,
      ),
    );
  }

  /**
   * send's early send (Backend.sendEarly) for a plain send: the message goes
   * to its receiver before the call's checks and bookkeeping run again and
   * the call is numbered and recorded, so a receiver waiting for it goes on
   * while this rank does them (in a ping-pong, what each side does between
   * taking a message and sending the next is the latency). Only where every
   * check would pass and no fault is injected: the call then goes as any
   * other, its backend only waiting for the receive's answer. 0 for anything
   * else, or where the backend sent nothing early.
   */
  #sendEarly(tensor: Tensor, dst: number, options: P2POptions | undefined): number {
    const backend = this.#backend;
    const rank = this.#info.rank;
    if (
      options !== undefined ||
      backend === undefined ||
      this.#destroyed ||
      rank < 0 ||
      !Number.isInteger(dst) ||
      dst < 0 ||
      dst >= this.size ||
      dst === rank ||
      !isCommTensor(tensor) ||
      // A predicted send carries its sender's clock beside it, sent as the call is made.
      this.#prediction?.active ||
      rankFaults() !== undefined
    ) {
      return 0;
    }
    return backend.sendEarly(tensor, dst, 0);
  }

  recv(tensor: Tensor, src: number, options?: P2POptions): Work<Tensor> {
    return this.#recvInto(tensor, src, options, tensor);
  }

  /** A receive into `tensor` whose Work resolves to `value`. */
  #recvInto<T>(tensor: Tensor, src: number, options: P2POptions | undefined, value: T): Work<T> {
    return this.#p2p('recv', tensor, src, options, (b, call) =>
      valueWhenDone(b.recv(call, tensor, src, options?.tag ?? 0), value),
    );
  }

  /**
   * recv without the copy where the backend can lend the sender's buffer
   * (the stores: threads and processes alike): the tensor is a view valid
   * until `release()`, and the sender's send completes only then. Elsewhere
   * the message is received into `like`, and release() does nothing.
   */
  recvBorrowed(like: Tensor, src: number, options?: P2POptions): Work<BorrowedTensor> {
    return this.#p2p('recv', like, src, options, (b, call) =>
      b.recvBorrowed(call, like, src, options?.tag ?? 0),
    );
  }

  /** A send or receive: checked, tracked and handed to `run` like every call, outside the collective order. */
  #p2p<T>(
    kind: 'send' | 'recv',
    tensor: Tensor,
    peer: number,
    options: P2POptions | undefined,
    run: (backend: Backend, call: CallInfo) => T | Promise<T>,
  ): Work<T> {
    const role = kind === 'send' ? 'dst' : 'src';
    const tag = options?.tag ?? 0;
    return this.#call(
      kind === 'send' ? OPS.send : OPS.recv,
      p2pRoles(options, role, peer, tag),
      () => {
        assertCommTensor(tensor, kind);
        checkPeer(this, peer, role, kind);
        checkTag(options?.tag, kind);
        return kind === 'send'
          ? this.#recent.send.signed(tensor, peer, tag, sendSigned)
          : this.#recent.recv.signed(tensor, peer, tag, recvSigned);
      },
      run,
    );
  }

  /**
   * Issues every op at once; each returns its own Work (sends never wait on
   * unrelated receives). A backend that runs batches (NCCL) gets the checked
   * ops together, to run as one group.
   */
  batchIsendIrecv(ops: P2POp[]): Work<void>[] {
    if (!Array.isArray(ops)) return [Work.rejected(new TypeError('batchIsendIrecv: ops must be an array'))];
    const batched: BatchedP2P[] = [];
    const settlers: Array<(outcome: Promise<void>) => void> = [];
    const batcher = this.#backend?.runsBatches ? this.#backend : undefined;
    const works = ops.map((o, i) => {
      if (o?.op !== 'isend' && o?.op !== 'irecv') {
        return Work.rejected(new TypeError(`batchIsendIrecv: ops[${i}].op must be 'isend' or 'irecv'`));
      }
      if (batcher === undefined) {
        if (o.op === 'isend') return this.send(o.tensor, o.peer, { tag: o.tag });
        // Not recv(...).then(): chaining on the call's Work would be a wait on it (predict mode's clock would
        // catch up with it then), where the program has only issued it.
        return this.#recvInto(o.tensor, o.peer, { tag: o.tag }, undefined);
      }
      const kind = o.op === 'isend' ? 'send' : 'recv';
      return this.#p2p(
        kind,
        o.tensor,
        o.peer,
        { tag: o.tag },
        // Runs now, during #call; the promise settles once the whole batch was handed over below.
        (_backend, call) =>
          new Promise<void>((resolve, reject) => {
            batched.push({ kind, call, tensor: o.tensor, peer: o.peer, tag: o.tag ?? 0 });
            settlers.push((outcome) => outcome.then(resolve, reject));
          }),
      );
    });
    if (batcher !== undefined && batched.length > 0) {
      batcher.batch(batched).forEach((outcome, i) => {
        settlers[i](outcome);
      });
    }
    return works;
  }

  sendObject(obj: unknown, dst: number, options?: P2POptions): Work<void> {
    let bytes: Tensor;
    try {
      bytes = objectToTensor(obj, 'sendObject');
    } catch (error) {
      return Work.rejected(error);
    }
    return this.send(bytes, dst, options);
  }

  recvObject(src: number, options?: P2POptions): Work<unknown> {
    return this.#recvAny('recvObject', src, options, async (b, call, tag) =>
      tensorToObject(await b.recvAny(call, src, tag)),
    );
  }

  /**
   * A receive of whatever tensor the peer sent (any dtype and size), lent as
   * recvBorrowed lends: a view valid until `release()`, where the backend can
   * lend; elsewhere the receiver's own copy. For framing on top of sends
   * (p2p's compressed chunks); `recv` is the checked form.
   */
  recvAnyBorrowed(src: number, options?: P2POptions): Work<BorrowedTensor> {
    return this.#recvAny('recvObject', src, options, (b, call, tag) => b.recvAnyBorrowed(call, src, tag));
  }

  /**
   * Whether this group carries sendViews/recvViews: its ranks map each
   * other's host memory (threads of one process, over MemoryTensorStore).
   */
  get lendsViews(): boolean {
    return this.#backend?.lendsViews === true;
  }

  /**
   * Sends host tensors as one message without copying them: the receiver's
   * recvViews maps their bytes. Completes once the receiver released them;
   * until then they must not change. Only where `lendsViews` (else it
   * rejects, naming the group); ordered with this stream's sends.
   */
  sendViews(tensors: readonly Tensor[], dst: number, options?: P2POptions): Work<void> {
    const tag = options?.tag ?? 0;
    return this.#call(
      OPS.sendViews,
      p2pRoles(options, 'dst', dst, tag),
      () => {
        const bytes = assertHostTensors(tensors, 'sendViews');
        checkPeer(this, dst, 'dst', 'sendViews');
        checkTag(options?.tag, 'sendViews');
        checkLendsViews(this, 'sendViews');
        return {
          signature: 'p2p',
          bytes,
          label: `sendViews(${tensors.length} tensors, ${bytes} bytes, dst=${dst}${tagText(tag)})`,
        };
      },
      (b, call) => b.sendViews(call, tensors, dst, tag),
    );
  }

  /**
   * Receives a sendViews message: one uint8 view per tensor sent, on the
   * sender's own bytes, valid until `release()` (which completes the send).
   */
  recvViews(src: number, options?: P2POptions): Work<BorrowedViews> {
    return this.#recvAny('recvViews', src, options, (b, call, tag) => b.recvViews(call, src, tag));
  }

  /** A receive whose size only the sender knows, tracked like recvObject. */
  #recvAny<T>(
    op: 'recvObject' | 'recvViews',
    src: number,
    options: P2POptions | undefined,
    run: (backend: Backend, call: CallInfo, tag: number) => Promise<T>,
  ): Work<T> {
    const tag = options?.tag ?? 0;
    return this.#call(
      OPS[op],
      p2pRoles(options, 'src', src, tag),
      () => {
        checkPeer(this, src, 'src', op);
        if (op === 'recvViews') checkLendsViews(this, op);
        checkTag(options?.tag, op);
        return {
          signature: 'p2p',
          bytes: 0,
          label: `${op}(src=${src}${tagText(tag)})`,
        };
      },
      (b, call) => run(b, call, tag),
    );
  }

  broadcastObject(obj: unknown, options: { src: number } & CallOptions): Work<unknown> {
    // Serialized during the checks: an object that cannot be cloned fails every rank at once, not at its timeout.
    let mine: Tensor | undefined;
    return this.#call(
      OPS.broadcastObject,
      options,
      () => {
        const src = checkGroupRank(this, options?.src, 'src', 'broadcastObject');
        if (this.rank === src) mine = objectToTensor(obj, 'broadcastObject');
        // Only the source knows the size: predict mode's exchange takes the members' largest (predicted-calls.ts).
        return {
          signature: `broadcastObject(src=${src})`,
          bytes: mine?.nbytes ?? 0,
        };
      },
      async (b, call) => tensorToObject(await b.broadcastAny(call, mine, options.src)),
    );
  }

  allGatherObject(obj: unknown, options?: CallOptions): Work<unknown[]> {
    let mine: Tensor;
    return this.#call(
      OPS.allGatherObject,
      options,
      () => {
        mine = objectToTensor(obj, 'allGatherObject');
        // As torch moves them: every object padded to the largest (predict mode's exchange takes the largest).
        return { signature: 'allGatherObject()', bytes: mine.nbytes * this.size };
      },
      async (b, call) => (await b.allGatherAny(call, mine)).map(tensorToObject),
    );
  }

  /** torch's gather_object: every rank's object, in group-rank order, on `dst`; undefined elsewhere. */
  gatherObject(obj: unknown, options: { dst: number } & CallOptions): Work<unknown[] | undefined> {
    let bytes: Tensor;
    return this.#call(
      OPS.gatherObject,
      options,
      () => {
        const dst = checkGroupRank(this, options?.dst, 'dst', 'gatherObject');
        bytes = objectToTensor(obj, 'gatherObject');
        return { signature: `gatherObject(dst=${dst})`, bytes: bytes.nbytes * this.size };
      },
      async (b, call) => (await b.gatherAny(call, bytes, options.dst))?.map(tensorToObject),
    );
  }

  /**
   * torch's scatter_object_list: `objs[p]` to group rank p, from `src`;
   * resolves to this rank's object. Only src's `objs` is read (others may
   * pass undefined), as in torch.
   */
  scatterObject(objs: unknown[] | undefined, options: { src: number } & CallOptions): Work<unknown> {
    let parts: Tensor[] | undefined;
    return this.#call(
      OPS.scatterObject,
      options,
      () => {
        const src = checkGroupRank(this, options?.src, 'src', 'scatterObject');
        if (this.rank === src) {
          if (!Array.isArray(objs) || objs.length !== this.size) {
            throw new RangeError(
              `scatterObject: objs must be an array of ${this.size} objects (one per group rank) on the source rank, got ${
                Array.isArray(objs) ? `${objs.length}` : String(objs)
              }`,
            );
          }
          parts = objs.map((o, i) => objectToTensor(o, `scatterObject: objs[${i}]`));
        }
        const largest = parts?.reduce((most, p) => Math.max(most, p.nbytes), 0) ?? 0;
        return { signature: `scatterObject(src=${src})`, bytes: largest * this.size };
      },
      async (b, call) => tensorToObject(await b.scatterAny(call, parts, options.src)),
    );
  }

  /**
   * torch's recv without a src: receives into `tensor` the first message on
   * `tag` from any other member (sent with a plain send); resolves to its
   * sender's group rank. Receives on the same tag match messages in the order
   * they were made. GPU tensors on NCCL cannot (NCCL has no such receive).
   */
  recvFromAny(tensor: Tensor, options?: P2POptions): Work<number> {
    const tag = options?.tag ?? 0;
    return this.#call(
      OPS.recvFromAny,
      { timeoutMs: options?.timeoutMs, tag },
      () => {
        assertCommTensor(tensor, 'recvFromAny');
        checkTag(options?.tag, 'recvFromAny');
        if (this.size < 2) {
          throw new RangeError(`recvFromAny: group "${this.name}" has no other rank to receive from`);
        }
        return {
          signature: 'p2p',
          bytes: tensor.nbytes,
          label: `recvFromAny(${tensor.describe()}${tagText(tag)})`,
        };
      },
      (b, call) => b.recvFromAny(call, tensor, tag),
    );
  }

  /** torch's get_group_rank: this group's rank of `globalRank`; a RangeError naming the group if it is no member. */
  groupRank(globalRank: number): number {
    const rank = Number.isInteger(globalRank) ? this.#info.ranks.indexOf(globalRank) : -1;
    if (rank < 0) {
      throw new RangeError(
        `groupRank: global rank ${String(globalRank)} is not a member of group "${this.name}" (members: ${this.ranks.join(', ')})`,
      );
    }
    return rank;
  }

  /** torch's get_global_rank: the global rank of `groupRank` in this group. */
  globalRank(groupRank: number): number {
    return this.#info.ranks[checkGroupRank(this, groupRank, 'group rank', 'globalRank')];
  }

  /** Releases the group; later calls on it reject. Local to this rank, like torch's destroy_process_group. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#backend?.destroy();
    this.#info.predictExchange?.twin.destroy();
  }

  /** destroy(): `using group = …` (Node 24 and later) destroys it at the block's end. */
  [Symbol.dispose](): void {
    this.destroy();
  }
}

/**
 * A point-to-point call's options with its peer and tag, as #call takes them.
 * Built as literals: in V8 a spread followed by a key the source lacks
 * (`{ ...options, dst }`) leaves the fast path and costs about a
 * microsecond, a tenth of a small message's round trip.
 */
function p2pRoles(
  options: CallOptions | undefined,
  role: 'src' | 'dst',
  peer: number,
  tag: number,
): CallOptions & RawRoles {
  const timeoutMs = options?.timeoutMs;
  return role === 'dst' ? { timeoutMs, dst: peer, tag } : { timeoutMs, src: peer, tag };
}

/** A point-to-point call's tag, as p2pRoles gave it (0 where none was). */
function p2pTag(roles: RawRoles | undefined): number {
  return (roles?.tag as number | undefined) ?? 0;
}
