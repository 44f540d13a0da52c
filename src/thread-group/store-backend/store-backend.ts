/**
 * StoreBackend: every ThreadGroup call over any TensorStore (memory store for
 * threads, file store for processes, same-GPU ranks). It assumes nothing about
 * the medium beyond the four-step handshake.
 */
import type { TensorStore } from '../../runtime/tensor-store.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import {
  type ArrivalPattern,
  type Backend,
  type BorrowedTensor,
  type BorrowedViews,
  type CallInfo,
  type GroupView,
  MONITORED_BARRIER_ROOT,
} from '../backend.ts';
import { isPremulSum, type Reduction } from '../reduction.ts';
import { arrivals, tellPeers } from './abandon.ts';
import { allReduce, ONE_EXCHANGE_MAX_BYTES } from './all-reduce.ts';
import {
  allReduceAcrossNodes,
  allReduceAmongNodes,
  allReduceByRails,
  evenNodes,
  nodesOf,
  oneRankPerNode,
  worthTwoLevels,
} from './all-reduce-nodes.ts';
import { allReduceInRegion, fitsRegion } from './all-reduce-region.ts';
import { allToAll, splitRows } from './all-to-all.ts';
import { CallRegion, regionBytes } from './call-region.ts';
import { Exchange, FINGERPRINT, runExchange } from './exchange.ts';
import { allGather, allGatherInto, reduceScatter, reduceScatterTensor } from './gather-scatter.ts';
import { monitoredBarrier, verdictTimeoutMs } from './monitored-barrier.ts';
import { type Candidate, firstMessage, receive, recv, StreamCounters, send } from './p2p.ts';
import { premultiplied } from './premul-sum.ts';
import { broadcast, broadcastCompared, gather, reduce, scatter } from './rooted.ts';
import { copyElements } from './slices.ts';
import {
  allGatherAny,
  broadcastAny,
  broadcastAnyCompared,
  gatherAny,
  scatterAny,
  takeCopy,
} from './variable.ts';

/** Tag compared between the two ends of a point-to-point message; shapes are checked separately. */
const P2P_SIGNATURE = 'p2p';
/** How long a region call that failed waits for the peers in the keyed store to read its fingerprint. */
const TELL_KEYED_TIMEOUT_MS = 1_000;

export class StoreBackend implements Backend {
  readonly #store: TensorStore;
  readonly #group: GroupView;
  readonly #sent = new StreamCounters();
  readonly #received = new StreamCounters();
  /**
   * Per tag, the recvFromAny calls still choosing their sender: receives on
   * that tag made after one wait until it chose, so messages match receives
   * in the order the receives were made (MPI's rule for any-source receives).
   */
  readonly #choosing = new Map<number, Promise<void>>();
  /** Where small collectives meet when every member maps the same memory (threads sharing a MemoryTensorStore). */
  readonly #region: CallRegion | undefined;

  /**
   * `sharedRegion: false` for a backend that serves only some of the group's calls (NcclBackend's
   * fallback and bootstrap): region slots are taken by call number, and would wait for calls
   * that go elsewhere.
   */
  constructor(store: TensorStore, group: GroupView, options: { sharedRegion?: boolean } = {}) {
    this.#store = store;
    this.#group = group;
    const wanted = group.size > 1 && options.sharedRegion !== false;
    const shared = wanted ? store.sharedRegion?.(group.id, regionBytes(group.size)) : undefined;
    this.#region = shared && new CallRegion(shared, group);
  }

  get lendsViews(): boolean {
    return this.#store.srcSetViews !== undefined && this.#store.destGetViews !== undefined;
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
    } catch {}
  }

  /** A call whose first data exchange is not every-rank-reads-every-rank: the fingerprints go first. */
  #runCompared(call: CallInfo, algorithm: (x: Exchange) => Promise<void>): Promise<void> {
    if (call.checks === false) return this.#run(call, algorithm);
    return this.#run(call, async (x) => {
      await x.compareCalls();
      await algorithm(x);
    });
  }

  #p2p(call: CallInfo, src: number, dst: number, message: number, tag: number): Exchange {
    const prefix = `${this.#group.id}:p${src}>${dst}:${tag}:${message}`;
    return new Exchange(this.#store, this.#group, { ...call, signature: P2P_SIGNATURE }, prefix);
  }

  allReduce(call: CallInfo, tensor: Tensor, op: Reduction): Promise<void> {
    if (this.#region && fitsRegion(tensor)) return this.#allReduceInRegion(this.#region, call, tensor, op);
    return this.#run(call, async (x) => {
      const nodes = nodesOf(x);
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

  broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void> {
    if (call.checks === false) return this.#run(call, (x) => broadcast(x, tensor, src));
    return this.#run(call, (x) => broadcastCompared(x, tensor, src));
  }

  reduce(call: CallInfo, tensor: Tensor, dst: number, op: Reduction): Promise<void> {
    return this.#runCompared(call, async (x) => {
      if (!isPremulSum(op)) return reduce(x, tensor, dst, op);
      const scaled = premultiplied(tensor, op.factor);
      await reduce(x, scaled, dst, 'sum');
      if (x.rank === dst) copyElements(tensor, 0, scaled);
    });
  }

  allGather(call: CallInfo, outputs: readonly Tensor[], input: Tensor): Promise<void> {
    return this.#run(call, (x) => allGather(x, outputs, input));
  }

  allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void> {
    return this.#run(call, (x) => allGatherInto(x, output, input));
  }

  reduceScatter(call: CallInfo, output: Tensor, inputs: readonly Tensor[], op: Reduction): Promise<void> {
    return this.#runCompared(call, (x) =>
      isPremulSum(op)
        ? reduceScatter(
            x,
            output,
            inputs.map((t) => premultiplied(t, op.factor)),
            'sum',
          )
        : reduceScatter(x, output, inputs, op),
    );
  }

  reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: Reduction): Promise<void> {
    return this.#run(call, (x) =>
      isPremulSum(op)
        ? reduceScatterTensor(x, output, premultiplied(input, op.factor), 'sum')
        : reduceScatterTensor(x, output, input, op),
    );
  }

  allToAll(call: CallInfo, outputs: readonly Tensor[], inputs: readonly Tensor[]): Promise<void> {
    return this.#runCompared(call, (x) => allToAll(x, outputs, inputs));
  }

  allToAllSingle(
    call: CallInfo,
    output: Tensor,
    input: Tensor,
    outputSplits: readonly number[],
    inputSplits: readonly number[],
  ): Promise<void> {
    return this.#runCompared(call, (x) =>
      allToAll(x, splitRows(output, outputSplits), splitRows(input, inputSplits)),
    );
  }

  gather(
    call: CallInfo,
    tensor: Tensor,
    dst: number,
    gatherList: readonly Tensor[] | undefined,
  ): Promise<void> {
    return this.#runCompared(call, (x) => gather(x, tensor, dst, gatherList));
  }

  scatter(
    call: CallInfo,
    tensor: Tensor,
    src: number,
    scatterList: readonly Tensor[] | undefined,
  ): Promise<void> {
    return this.#runCompared(call, (x) => scatter(x, tensor, src, scatterList));
  }

  barrier(call: CallInfo): Promise<void> {
    const token = Tensor.empty([0], 'uint8');
    return this.#run(call, async (x) => {
      await allGatherAny(x, token);
    });
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
    const x = this.#p2p(call, this.#group.rank, dst, this.#sent.take(this.#group.rank, dst, tag), tag);
    return runExchange(x, (ex) => send(ex, tensor, dst));
  }

  /** The exchange of the next message from `src` on `tag`, once no earlier recvFromAny on `tag` is still choosing. */
  #nextReceive(call: CallInfo, src: number, tag: number): Exchange | Promise<Exchange> {
    const take = () =>
      this.#p2p(call, src, this.#group.rank, this.#received.take(src, this.#group.rank, tag), tag);
    const choosing = this.#choosing.get(tag);
    return choosing ? choosing.then(take) : take();
  }

  async recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    const x = await this.#nextReceive(call, src, tag);
    return runExchange(x, (ex) => recv(ex, tensor, src));
  }

  /**
   * Takes the first message to come on `tag` from any peer, then receives it
   * as recv does. Receives on `tag` made after this one wait until it chose.
   */
  async recvFromAny(call: CallInfo, tensor: Tensor, tag: number): Promise<number> {
    const me = this.#group.rank;
    const earlier = this.#choosing.get(tag);
    let chosen!: () => void;
    const choice = new Promise<void>((resolve) => {
      chosen = resolve;
    });
    const mine = earlier ? earlier.then(() => choice) : choice;
    this.#choosing.set(tag, mine);
    let taken: Candidate & { value: Tensor };
    try {
      await earlier;
      const candidates = Array.from({ length: this.#group.size }, (_, src) => src)
        .filter((src) => src !== me)
        .map((src) => ({ src, x: this.#p2p(call, src, me, this.#received.peek(src, me, tag), tag) }));
      taken = await firstMessage(candidates, call);
      this.#received.take(taken.src, me, tag);
    } finally {
      chosen();
      if (this.#choosing.get(tag) === mine) this.#choosing.delete(tag);
    }
    await runExchange(taken.x, (x) => receive(x, taken.value, tensor, taken.src));
    return taken.src;
  }

  recvBorrowed(call: CallInfo, like: Tensor, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#lend(call, src, tag, async (x) => {
      const tensor = await x.get(0, src);
      x.expectLike(tensor, like, src);
      return { tensor };
    });
  }

  recvAnyBorrowed(call: CallInfo, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#lend(call, src, tag, async (x) => ({ tensor: await x.get(0, src) }));
  }

  sendViews(call: CallInfo, tensors: readonly Tensor[], dst: number, tag: number): Promise<void> {
    const x = this.#p2p(call, this.#group.rank, dst, this.#sent.take(this.#group.rank, dst, tag), tag);
    return runExchange(x, async (ex) => {
      await ex.publishViews(0, tensors, [dst]);
      await ex.consumed(0);
    });
  }

  recvViews(call: CallInfo, src: number, tag: number): Promise<BorrowedViews> {
    return this.#lend(call, src, tag, async (x) => ({ views: await x.getViews(0, src) }));
  }

  /** The sender's value as the store hands it out (`take` reads and checks it), until release(). */
  async #lend<T>(
    call: CallInfo,
    src: number,
    tag: number,
    take: (x: Exchange) => Promise<T>,
  ): Promise<T & { release(): Promise<void> }> {
    const x = await this.#nextReceive(call, src, tag);
    let value: T;
    try {
      value = await take(x);
    } catch (error) {
      await x.abort(error);
      throw error;
    }
    let released: Promise<void> | undefined;
    return {
      ...value,
      release: () => (released ??= runExchange(x, (ex) => ex.finish(0, src))),
    };
  }

  async recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor> {
    const x = await this.#nextReceive(call, src, tag);
    let value: Tensor | undefined;
    await runExchange(x, async (ex) => {
      value = await takeCopy(ex, 0, src);
    });
    return value!;
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
    const me = this.#group.rank;
    const x =
      pattern.kind === 'send'
        ? this.#p2p(call, me, pattern.peer, this.#sent.take(me, pattern.peer, pattern.tag), pattern.tag)
        : pattern.kind === 'recv'
          ? await this.#nextReceive(call, pattern.peer, pattern.tag)
          : new Exchange(this.#store, this.#group, call);
    // Peers that came to the region learn the error there, the others from the markers.
    if (this.#region && call.seq >= 0) await this.#region.abandon(call, error);
    await tellPeers(this.#store, this.#group, x, call, arrivals(pattern, me, x.peers()), error);
  }

  destroy(): void {}
}
