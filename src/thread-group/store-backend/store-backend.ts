/**
 * StoreBackend: every ThreadGroup call over any TensorStore (memory store for
 * threads, file store for processes, same-GPU ranks). Collectives run over
 * the store's four-step handshake, and small ones in a shared call region
 * (call-region.ts) where the members map common memory (threads, processes
 * of one node); point-to-point calls go to StoreP2P (store-p2p.ts), which
 * uses a mailbox there. Which ranks share a node picks the algorithm (node-layout.ts).
 */
import type { TensorStore } from '../../runtime/tensor-store.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import {
  type ArrivalPattern,
  Backend,
  type BorrowedTensor,
  type BorrowedViews,
  type CallInfo,
  type GroupView,
  MONITORED_BARRIER_ROOT,
} from '../backend.ts';
import { isPremulSum, type Reduction } from '../reduction.ts';
import { arrivals, tellPeers } from './abandon.ts';
import { allReduce, ONE_EXCHANGE_MAX_BYTES } from './all-reduce.ts';
import { allReduceAcrossNodes, allReduceAmongNodes, allReduceByRails } from './all-reduce-nodes.ts';
import { allReduceInRegion, fitsRegion } from './all-reduce-region.ts';
import { allToAll, splitRows } from './all-to-all.ts';
import { allToAllSteps } from './all-to-all-region.ts';
import { broadcastAcrossNodes } from './broadcast-nodes.ts';
import { CallRegion, regionBytes } from './call-region.ts';
import { callRegionMemory } from './call-region-memory.ts';
import { Exchange, FINGERPRINT, runExchange } from './exchange.ts';
import {
  allGatherIntoSteps,
  allGatherSteps,
  broadcastSteps,
  gatherSteps,
  type Rooted,
  reduceScatterSteps,
  type Shares,
  scatterSteps,
} from './gather-region.ts';
import { allGather, allGatherInto, reduceScatter, reduceScatterTensor } from './gather-scatter.ts';
import { monitoredBarrier, verdictTimeoutMs } from './monitored-barrier.ts';
import {
  evenNodes,
  nodesOf,
  oneRankPerNode,
  reducesInTwoLevels,
  spansNodes,
  worthTwoLevels,
} from './node-layout.ts';
import { premultiplied } from './premul-sum.ts';
import { reduceAcrossNodes } from './reduce-nodes.ts';
import { reduceScatterAcrossNodes } from './reduce-scatter-nodes.ts';
import { reduceScatterPipelined, worthPipelining } from './reduce-scatter-pipelined.ts';
import { fitsRecord, meetInRegion } from './region-call.ts';
import { broadcast, broadcastCompared, gather, reduce, scatter } from './rooted.ts';
import { copyElements, slicesLike } from './slices.ts';
import { StoreP2P } from './store-p2p.ts';
import { allGatherAny, broadcastAny, broadcastAnyCompared, gatherAny, scatterAny } from './variable.ts';

/** How long a region call that failed waits for the peers in the keyed store to read its fingerprint. */
const TELL_KEYED_TIMEOUT_MS = 1_000;

/** A barrier's contribution in the region: nothing, so one tensor serves every call. */
const BARRIER_TOKEN = Tensor.empty([0], 'uint8');

/** A barrier in the keyed store: every rank's empty token to every rank. */
async function keyedBarrier(x: Exchange): Promise<void> {
  await allGatherAny(x, BARRIER_TOKEN);
}

/** `algorithm` after the calls' fingerprints are compared, where checks are on. */
function compared(call: CallInfo, algorithm: (x: Exchange) => Promise<void>): (x: Exchange) => Promise<void> {
  if (call.checks === false) return algorithm;
  return async (x) => {
    await x.compareCalls();
    await algorithm(x);
  };
}

export class StoreBackend extends Backend {
  readonly backendName = 'StoreBackend';
  readonly #store: TensorStore;
  readonly #group: GroupView;
  /** Where small collectives meet when every member maps common memory (call-region-memory.ts). */
  readonly #region: CallRegion | undefined;
  readonly #p2p: StoreP2P;
  /** Which of the group's ranks share a node (nodesOf), null until a call first asks: fixed for the group. */
  #layout: number[][] | undefined | null = null;
  /** The node regions nodeMemory mapped (store key → owner's global rank), given up when the group is destroyed. */
  readonly #nodeRegions = new Map<string, number>();

  /**
   * `sharedRegion: false` for a backend that serves only some of the group's calls (NcclBackend's
   * fallback and bootstrap): region slots are taken by call number, and would wait for calls
   * that go elsewhere. `mailbox: false` for a group that makes no point-to-point call (the
   * start-up barrier's): its mailbox would hold a ring per ordered pair of ranks for nothing.
   */
  constructor(
    store: TensorStore,
    group: GroupView,
    options: { sharedRegion?: boolean; mailbox?: boolean } = {},
  ) {
    super();
    this.#store = store;
    this.#group = group;
    const wanted = group.size > 1 && options.sharedRegion !== false;
    const memory = wanted
      ? callRegionMemory(store, group.id, regionBytes(group.size), group.ranks, group.rank)
      : undefined;
    this.#region = memory && new CallRegion(memory, group);
    this.#p2p = new StoreP2P(store, group, wanted && options.mailbox !== false);
  }

  override get lendsViews(): boolean {
    return this.#store.srcSetViews !== undefined && this.#store.destGetViews !== undefined;
  }

  /** A region of the store's node files (TensorStore.nodeRegion), under a key of this group's own. */
  override nodeMemory(key: string, owner: number, bytes: number): Uint8Array | undefined {
    const storeKey = `${this.#group.id}~${key}`;
    const global = this.#group.ranks[owner];
    const region = this.#store.nodeRegion?.(storeKey, global, bytes);
    if (!region) return undefined;
    this.#nodeRegions.set(storeKey, global);
    return new Uint8Array(region.buffer, region.byteOffset ?? 0, bytes);
  }

  /** Which of the group's ranks share a node (node-layout.ts), worked out by the group's first call that asks. */
  #nodes(x: Exchange): number[][] | undefined {
    if (this.#layout === null) this.#layout = nodesOf(x);
    return this.#layout;
  }

  async #run(call: CallInfo, algorithm: (x: Exchange) => Promise<void>): Promise<void> {
    // Every collective takes its place in the region, so a peer that came there for this call fails there.
    if (this.#region && call.seq >= 0) await this.#region.pass(call);
    return runExchange(new Exchange(this.#store, this.#group, call), algorithm);
  }

  /** #tellKeyed, made once for the region's calls to hand on. */
  readonly #tellKeyedPeers = (call: CallInfo, peers: number[]) => this.#tellKeyed(call, peers);

  /** Tells `peers`, waiting in the keyed store for this rank's fingerprint, the signature this rank called. */
  async #tellKeyed(call: CallInfo, peers: number[]): Promise<void> {
    // They wait for it already; one that stopped at another rank's fingerprint never reads this one.
    const bounded = { ...call, timeoutMs: Math.min(call.timeoutMs, TELL_KEYED_TIMEOUT_MS) };
    const x = new Exchange(this.#store, this.#group, bounded);
    try {
      await x.publish(0, FINGERPRINT, peers);
      // They read it and fail with the mismatch, which they hand back here: this rank knows it already.
      await x.consumed(0);
    } catch {
      // That handed-back mismatch, or the bounded wait for a peer that never reads: nothing this rank lacks.
    }
  }

  /** A call whose first data exchange is not every-rank-reads-every-rank: the fingerprints go first. */
  #runCompared(call: CallInfo, algorithm: (x: Exchange) => Promise<void>): Promise<void> {
    return this.#run(call, compared(call, algorithm));
  }

  allReduce(call: CallInfo, tensor: Tensor, op: Reduction): Promise<void> {
    if (this.#region && fitsRegion(this.#region, tensor))
      return this.#allReduceInRegion(this.#region, call, tensor, op);
    return this.#run(call, async (x) => {
      const nodes = this.#nodes(x);
      // An average of averages is wrong when nodes hold different numbers of ranks: avg stays flat. So
      // does a small tensor: its cost is latency, and a hop within a node costs more than one to a peer.
      // Ranks of one node each (one rank per node, or node leaders) pipeline a large tensor in chunks.
      const algorithm =
        worthTwoLevels(nodes) && op !== 'avg' && tensor.nbytes > ONE_EXCHANGE_MAX_BYTES
          ? evenNodes(nodes)
            ? (t: Tensor, o: ReduceOp) => allReduceByRails(x, t, o, nodes)
            : (t: Tensor, o: ReduceOp) => allReduceAcrossNodes(x, t, o, nodes)
          : oneRankPerNode(nodes)
            ? (t: Tensor, o: ReduceOp) => allReduceAmongNodes(x, t, o)
            : (t: Tensor, o: ReduceOp) => allReduce(x, t, o);
      if (!isPremulSum(op)) return algorithm(tensor, op);
      const scaled = premultiplied(tensor, op.factor);
      await algorithm(scaled, 'sum');
      copyElements(tensor, 0, scaled);
    });
  }

  #allReduceInRegion(region: CallRegion, call: CallInfo, tensor: Tensor, op: Reduction): Promise<void> {
    if (!isPremulSum(op)) return allReduceInRegion(region, call, tensor, op, this.#tellKeyedPeers);
    const scaled = premultiplied(tensor, op.factor);
    return allReduceInRegion(region, call, scaled, 'sum', this.#tellKeyedPeers).then(() =>
      copyElements(tensor, 0, scaled),
    );
  }

  /** The group's region where it serves a call that brings `bytes` to a record, of host `tensors`. */
  #regionFor(bytes: number, tensors: readonly (Tensor | undefined)[]): CallRegion | undefined {
    const region = this.#region;
    return region && fitsRecord(region, bytes, tensors) ? region : undefined;
  }

  broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void> {
    const region = this.#regionFor(tensor.nbytes, [tensor]);
    if (region) return meetInRegion(region, call, broadcastSteps, tensor, src, this.#tellKeyedPeers);
    return this.#run(call, async (x) => {
      // A large tensor for a group spanning nodes crosses the network once per node, not once per rank. Its
      // size and the group are the same on every rank that called alike; one that did not is told at once
      // by either path's first exchange, in which every rank reads every other's signature.
      const nodes = this.#nodes(x);
      if (worthTwoLevels(nodes) && tensor.nbytes > ONE_EXCHANGE_MAX_BYTES) {
        if (call.checks !== false) await x.compareCalls();
        return broadcastAcrossNodes(x, tensor, src, nodes);
      }
      return call.checks === false ? broadcast(x, tensor, src) : broadcastCompared(x, tensor, src);
    });
  }

  reduce(call: CallInfo, tensor: Tensor, dst: number, op: Reduction): Promise<void> {
    return this.#runCompared(call, async (x) => {
      // A large host tensor of a group spanning nodes is reduced within each node first, so each node sends
      // the root one tensor; avg stays flat (an average of averages is wrong on nodes of unequal size).
      const nodes = this.#nodes(x);
      const algorithm = reducesInTwoLevels(nodes, tensor, isPremulSum(op) ? 'sum' : op)
        ? (t: Tensor, o: ReduceOp) => reduceAcrossNodes(x, t, dst, o, nodes)
        : (t: Tensor, o: ReduceOp) => reduce(x, t, dst, o);
      if (!isPremulSum(op)) return algorithm(tensor, op);
      const scaled = premultiplied(tensor, op.factor);
      await algorithm(scaled, 'sum');
      if (x.rank === dst) copyElements(tensor, 0, scaled);
    });
  }

  allGather(call: CallInfo, outputs: readonly Tensor[], input: Tensor): Promise<void> {
    const region = this.#regionFor(input.nbytes, [input, ...outputs]);
    if (region) return meetInRegion(region, call, allGatherSteps, outputs, input, this.#tellKeyedPeers);
    return this.#run(call, (x) => allGather(x, outputs, input, this.#nodes(x)));
  }

  allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void> {
    const region = this.#regionFor(input.nbytes, [output, input]);
    if (region) return meetInRegion(region, call, allGatherIntoSteps, output, input, this.#tellKeyedPeers);
    return this.#run(call, (x) => allGatherInto(x, output, input, this.#nodes(x)));
  }

  /** reduceScatter's shares in the region, premultiplied for a premulSum. */
  #reduceScatterInRegion(
    region: CallRegion,
    call: CallInfo,
    output: Tensor,
    inputs: readonly Tensor[] | Tensor,
    op: Reduction,
  ): Promise<void> {
    let shares: Shares = { inputs, op: op as ReduceOp };
    if (isPremulSum(op)) {
      const scaled = (t: Tensor) => premultiplied(t, op.factor);
      shares = { inputs: Array.isArray(inputs) ? inputs.map(scaled) : scaled(inputs as Tensor), op: 'sum' };
    }
    return meetInRegion(region, call, reduceScatterSteps, output, shares, this.#tellKeyedPeers);
  }

  reduceScatter(call: CallInfo, output: Tensor, inputs: readonly Tensor[], op: Reduction): Promise<void> {
    const bytes = inputs.reduce((sum, t) => sum + t.nbytes, 0);
    const region = this.#regionFor(bytes, [output, ...inputs]);
    if (region) return this.#reduceScatterInRegion(region, call, output, inputs, op);
    return this.#runCompared(call, (x) => {
      const [parts, o] = isPremulSum(op)
        ? [inputs.map((t) => premultiplied(t, op.factor)), 'sum' as const]
        : [inputs, op];
      // Across nodes of several ranks each node sends a slice's owner one partial result (the calls were
      // compared above: not every pair of ranks exchanges a value there).
      const nodes = this.#nodes(x);
      if (reducesInTwoLevels(nodes, output, o)) return reduceScatterAcrossNodes(x, output, parts, o, nodes);
      if (worthPipelining(x, output, output.nbytes * x.size))
        return reduceScatterPipelined(x, output, parts, o);
      return reduceScatter(x, output, parts, o);
    });
  }

  reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: Reduction): Promise<void> {
    const region = this.#regionFor(input.nbytes, [output, input]);
    if (region) return this.#reduceScatterInRegion(region, call, output, input, op);
    return this.#run(call, async (x) => {
      const [whole, o] = isPremulSum(op) ? [premultiplied(input, op.factor), 'sum' as const] : [input, op];
      const nodes = this.#nodes(x);
      if (reducesInTwoLevels(nodes, output, o)) {
        await x.compareCalls();
        return reduceScatterAcrossNodes(x, output, slicesLike(whole, output, x.size), o, nodes);
      }
      // A large input where the store copies values goes to each peer its slice alone, in chunks, so that
      // copying and reducing overlap; every value goes to one peer, so the calls are compared first.
      if (worthPipelining(x, output, whole.nbytes)) {
        await x.compareCalls();
        return reduceScatterPipelined(x, output, slicesLike(whole, output, x.size), o);
      }
      // Across nodes each peer is sent its slice alone: the network carries a value whole, and the whole
      // input to every peer was n times the bytes. Within a node, peers read their slices of the one value
      // in place.
      if (spansNodes(nodes)) return reduceScatter(x, output, slicesLike(whole, output, x.size), o);
      return reduceScatterTensor(x, output, whole, o);
    });
  }

  allToAll(call: CallInfo, outputs: readonly Tensor[], inputs: readonly Tensor[]): Promise<void> {
    const keyed = (x: Exchange) => allToAll(x, outputs, inputs);
    const region = this.#region;
    if (!region) return this.#runCompared(call, keyed);
    // Ranks may bring different amounts: each says whether its pieces fit, and if one's do not, all go
    // to the keyed store, past the region (their slot is this call's already).
    const declined = () => runExchange(new Exchange(this.#store, this.#group, call), compared(call, keyed));
    return meetInRegion(region, call, allToAllSteps, outputs, inputs, this.#tellKeyedPeers, declined);
  }

  allToAllSingle(
    call: CallInfo,
    output: Tensor,
    input: Tensor,
    outputSplits: readonly number[],
    inputSplits: readonly number[],
  ): Promise<void> {
    return this.allToAll(call, splitRows(output, outputSplits), splitRows(input, inputSplits));
  }

  gather(
    call: CallInfo,
    tensor: Tensor,
    dst: number,
    gatherList: readonly Tensor[] | undefined,
  ): Promise<void> {
    const region = this.#regionFor(tensor.nbytes, [tensor, ...(gatherList ?? [])]);
    if (region) {
      const rooted: Rooted = { root: dst, list: gatherList };
      return meetInRegion(region, call, gatherSteps, tensor, rooted, this.#tellKeyedPeers);
    }
    return this.#runCompared(call, (x) => gather(x, tensor, dst, gatherList));
  }

  scatter(
    call: CallInfo,
    tensor: Tensor,
    src: number,
    scatterList: readonly Tensor[] | undefined,
  ): Promise<void> {
    const region = this.#regionFor(tensor.nbytes * this.#group.size, [tensor, ...(scatterList ?? [])]);
    if (region) {
      const rooted: Rooted = { root: src, list: scatterList };
      return meetInRegion(region, call, scatterSteps, tensor, rooted, this.#tellKeyedPeers);
    }
    return this.#runCompared(call, (x) => scatter(x, tensor, src, scatterList));
  }

  barrier(call: CallInfo): Promise<void> {
    if (!this.#region) return this.#run(call, keyedBarrier);
    // In the region a barrier is an allReduce of nothing: every rank arrives before any leaves, and the
    // last arrival wakes them all at once, where the keyed store reads every peer's token (N² reads). Peers
    // that made another call in the keyed store (a monitoredBarrier, a large allReduce) wait there for
    // this rank's values and verdicts, so it joins them there as a keyed barrier would, and they fail
    // as they would against one.
    return allReduceInRegion(this.#region, call, BARRIER_TOKEN, 'sum', () =>
      runExchange(new Exchange(this.#store, this.#group, call), keyedBarrier),
    );
  }

  monitoredBarrier(call: CallInfo, waitAllRanks: boolean): Promise<void> {
    const timeoutMs = call.timeoutMs;
    const waits =
      this.#group.rank === MONITORED_BARRIER_ROOT
        ? call
        : { ...call, timeoutMs: verdictTimeoutMs(timeoutMs) };
    return this.#run(waits, (x) => monitoredBarrier(x, timeoutMs, waitAllRanks));
  }

  send(call: CallInfo, tensor: Tensor, dst: number, tag: number): Promise<void> {
    return this.#p2p.send(call, tensor, dst, tag);
  }

  override sendEarly(tensor: Tensor, dst: number, tag: number): number {
    return this.#p2p.sendEarly(tensor, dst, tag);
  }

  override awaitEarlySend(call: CallInfo, dst: number, ticket: number): Promise<void> {
    return this.#p2p.awaitEarlySend(call, dst, ticket);
  }

  recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    return this.#p2p.recv(call, tensor, src, tag);
  }

  recvFromAny(call: CallInfo, tensor: Tensor, tag: number): Promise<number> {
    return this.#p2p.recvFromAny(call, tensor, tag);
  }

  override recvBorrowed(call: CallInfo, like: Tensor, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#p2p.recvBorrowed(call, like, src, tag);
  }

  override recvAnyBorrowed(call: CallInfo, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#p2p.recvAnyBorrowed(call, src, tag);
  }

  override sendViews(call: CallInfo, tensors: readonly Tensor[], dst: number, tag: number): Promise<void> {
    return this.#p2p.sendViews(call, tensors, dst, tag);
  }

  override recvViews(call: CallInfo, src: number, tag: number): Promise<BorrowedViews> {
    return this.#p2p.recvViews(call, src, tag);
  }

  recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor> {
    return this.#p2p.recvAny(call, src, tag);
  }

  async broadcastAny(call: CallInfo, tensor: Tensor | undefined, src: number): Promise<Tensor> {
    let value: Tensor | undefined;
    const compared = call.checks !== false;
    await this.#run(call, async (x) => {
      value = await (compared ? broadcastAnyCompared : broadcastAny)(x, tensor, src);
    });
    return value!;
  }

  async allGatherAny(call: CallInfo, tensor: Tensor): Promise<Tensor[]> {
    let values: Tensor[] = [];
    await this.#run(call, async (x) => {
      values = await allGatherAny(x, tensor);
    });
    return values;
  }

  async gatherAny(call: CallInfo, tensor: Tensor, dst: number): Promise<Tensor[] | undefined> {
    let values: Tensor[] | undefined;
    await this.#runCompared(call, async (x) => {
      values = await gatherAny(x, tensor, dst);
    });
    return values;
  }

  async scatterAny(call: CallInfo, tensors: readonly Tensor[] | undefined, src: number): Promise<Tensor> {
    let value: Tensor | undefined;
    await this.#runCompared(call, async (x) => {
      value = await scatterAny(x, tensors, src);
    });
    return value!;
  }

  /**
   * Takes part in the first exchange of a call that failed its local checks
   * (see abandon.ts). With fingerprints on, every collective's first exchange
   * is every rank to every rank, but monitoredBarrier's: it must not wait for
   * a missing rank.
   */
  async abandon(call: CallInfo, given: ArrivalPattern, error: Error): Promise<void> {
    const own = given.kind === 'send' || given.kind === 'recv' || given.kind === 'viaRoot';
    const pattern: ArrivalPattern = call.checks !== false && !own ? { kind: 'all' } : given;
    let x: Exchange | undefined;
    if (pattern.kind === 'send') x = await this.#p2p.failedSend(call, pattern.peer, pattern.tag);
    else if (pattern.kind === 'recv') x = await this.#p2p.failedRecv(call, pattern.peer, pattern.tag, error);
    else x = new Exchange(this.#store, this.#group, call);
    // A receive whose message came inline told its sender through the mailbox.
    if (x === undefined) return;
    // Peers that came to the region learn the error there, the others from the markers.
    if (this.#region && call.seq >= 0) await this.#region.abandon(call, error);
    await tellPeers(this.#store, this.#group, x, call, arrivals(pattern, this.#group.rank, x.peers()), error);
  }

  destroy(): void {
    this.#region?.release();
    this.#p2p.destroy();
    for (const [key, owner] of this.#nodeRegions) this.#store.releaseNodeRegion?.(key, owner);
    this.#nodeRegions.clear();
  }
}
