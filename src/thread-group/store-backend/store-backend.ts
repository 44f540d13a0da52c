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
  COMPLETED,
  type GroupView,
  MONITORED_BARRIER_ROOT,
} from '../backend.ts';
import { isPremulSum, type Reduction } from '../reduction.ts';
import { arrivals, TELL_TIMEOUT_MS, tellPeers } from './abandon.ts';
import { allReduce, ONE_EXCHANGE_MAX_BYTES } from './all-reduce.ts';
import { allReduceAcrossNodes, allReduceAmongNodes, allReduceByRails } from './all-reduce-nodes.ts';
import { allReduceInRegion, fitsRegion } from './all-reduce-region.ts';
import { allToAll, splitRows } from './all-to-all.ts';
import { broadcastAcrossNodes } from './broadcast-nodes.ts';
import { layoutMismatchError } from './call-failure.ts';
import { CallRegion, regionBytes } from './call-region.ts';
import { Exchange, FINGERPRINT, runExchange } from './exchange.ts';
import { allGather, allGatherInto, reduceScatter, reduceScatterTensor } from './gather-scatter.ts';
import { MAIL, Mailbox, type MailRecord, mailboxBytes, RECEIVED_INTO } from './mailbox.ts';
import { expectInline, inlineTensor, landInline } from './mailbox-p2p.ts';
import { monitoredBarrier, verdictTimeoutMs } from './monitored-barrier.ts';
import {
  evenNodes,
  nodesOf,
  oneRankPerNode,
  reducesInTwoLevels,
  spansNodes,
  worthTwoLevels,
} from './node-layout.ts';
import { firstMessage, receive, recv, StreamCounters, send } from './p2p.ts';
import { premultiplied } from './premul-sum.ts';
import { reduceAcrossNodes } from './reduce-nodes.ts';
import { reduceScatterAcrossNodes } from './reduce-scatter-nodes.ts';
import { broadcast, broadcastCompared, gather, reduce, scatter } from './rooted.ts';
import { copyElements, slicesLike } from './slices.ts';
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

/** A barrier's contribution in the region: nothing, so one tensor serves every call. */
const BARRIER_TOKEN = Tensor.empty([0], 'uint8');

/** A barrier in the keyed store: every rank's empty token to every rank. */
async function keyedBarrier(x: Exchange): Promise<void> {
  await allGatherAny(x, BARRIER_TOKEN);
}

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
  /** Where point-to-point messages go first when every member maps the same memory (see mailbox.ts). */
  readonly #mailbox: Mailbox | undefined;
  /** Which of the group's ranks share a node (nodesOf), null until a call first asks: fixed for the group. */
  #layout: number[][] | undefined | null = null;

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
    this.#store = store;
    this.#group = group;
    const wanted = group.size > 1 && options.sharedRegion !== false;
    const shared = wanted ? store.sharedRegion?.(group.id, regionBytes(group.size)) : undefined;
    this.#region = shared && new CallRegion(shared, group);
    const mail =
      wanted && options.mailbox !== false
        ? store.sharedRegion?.(`${group.id}:mail`, mailboxBytes(group.size))
        : undefined;
    this.#mailbox = mail && new Mailbox(mail, group);
  }

  get lendsViews(): boolean {
    return this.#store.srcSetViews !== undefined && this.#store.destGetViews !== undefined;
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

  broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void> {
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
    return this.#run(call, (x) => allGather(x, outputs, input, this.#nodes(x)));
  }

  allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void> {
    return this.#run(call, (x) => allGatherInto(x, output, input, this.#nodes(x)));
  }

  reduceScatter(call: CallInfo, output: Tensor, inputs: readonly Tensor[], op: Reduction): Promise<void> {
    return this.#runCompared(call, (x) => {
      const [parts, o] = isPremulSum(op)
        ? [inputs.map((t) => premultiplied(t, op.factor)), 'sum' as const]
        : [inputs, op];
      // Across nodes of several ranks each node sends a slice's owner one partial result (the calls were
      // compared above: not every pair of ranks exchanges a value there).
      const nodes = this.#nodes(x);
      if (reducesInTwoLevels(nodes, output, o)) return reduceScatterAcrossNodes(x, output, parts, o, nodes);
      return reduceScatter(x, output, parts, o);
    });
  }

  reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: Reduction): Promise<void> {
    return this.#run(call, async (x) => {
      const [whole, o] = isPremulSum(op) ? [premultiplied(input, op.factor), 'sum' as const] : [input, op];
      const nodes = this.#nodes(x);
      if (reducesInTwoLevels(nodes, output, o)) {
        await x.compareCalls();
        return reduceScatterAcrossNodes(x, output, slicesLike(whole, output, x.size), o, nodes);
      }
      // Across nodes each peer is sent its slice alone: the network carries a value whole, and the whole
      // input to every peer was n times the bytes. Within a node, peers read their slices of the one value
      // in place.
      if (spansNodes(nodes)) return reduceScatter(x, output, slicesLike(whole, output, x.size), o);
      return reduceScatterTensor(x, output, whole, o);
    });
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
    const message = this.#sent.take(this.#group.rank, dst, tag);
    const mailbox = this.#mailbox;
    const inline = mailbox?.carriesInline(tensor) && mailbox.sendInline(call, dst, tag, message, tensor);
    if (inline) return inline;
    return this.#sendStored(call, dst, tag, message, (x) => send(x, tensor, dst));
  }

  postSend(tensor: Tensor, dst: number, tag: number): number {
    const mailbox = this.#mailbox;
    if (!mailbox?.carriesInline(tensor)) return 0;
    const me = this.#group.rank;
    const ticket = mailbox.postAtOnce(dst, tag, this.#sent.peek(me, dst, tag), tensor);
    if (ticket !== 0) this.#sent.take(me, dst, tag);
    return ticket;
  }

  sendPosted(call: CallInfo, dst: number, ticket: number): Promise<void> {
    return (this.#mailbox as Mailbox).acknowledged(call, dst, ticket);
  }

  /** Message `message` to `dst` through the keyed store, announced first by a marker in the mailbox if any. */
  async #sendStored(
    call: CallInfo,
    dst: number,
    tag: number,
    message: number,
    algorithm: (x: Exchange) => Promise<void>,
  ): Promise<void> {
    await this.#mailbox?.post(call, dst, tag, message);
    return runExchange(this.#p2p(call, this.#group.rank, dst, message, tag), algorithm);
  }

  /** The number of the next message from `src` on `tag`, once no earlier recvFromAny on `tag` is still choosing. */
  #nextMessage(src: number, tag: number): number | Promise<number> {
    // No named closure on this path: in a rank bundle (keepNames) each would cost a defineProperty per call.
    const choosing = this.#choosing.get(tag);
    if (!choosing) return this.#received.take(src, this.#group.rank, tag);
    return choosing.then(() => this.#received.take(src, this.#group.rank, tag));
  }

  /**
   * The next message from `src` on `tag`: handed to `inline` when it came in
   * the mailbox with its bytes, else to `stored` with the exchange of its key.
   */
  #receive<T>(
    call: CallInfo,
    src: number,
    tag: number,
    inline: (record: MailRecord) => T,
    stored: (x: Exchange) => Promise<T>,
  ): Promise<T> {
    const message = this.#nextMessage(src, tag);
    if (typeof message === 'number') return this.#receiveMessage(call, src, tag, message, inline, stored);
    return message.then((m) => this.#receiveMessage(call, src, tag, m, inline, stored));
  }

  #receiveMessage<T>(
    call: CallInfo,
    src: number,
    tag: number,
    message: number,
    inline: (record: MailRecord) => T,
    stored: (x: Exchange) => Promise<T>,
    waited = false,
  ): Promise<T> {
    const mailbox = this.#mailbox;
    if (!mailbox) return this.#viaStore(call, src, tag, message, stored);
    return settled(() => {
      const got = mailbox.receive(
        call,
        src,
        tag,
        message,
        (record) => (record.kind === MAIL.inline ? { value: inline(record) } : undefined),
        waited,
      );
      if (got instanceof Promise) {
        return got.then((g) => (g ? g.value : this.#viaStore(call, src, tag, message, stored)));
      }
      return got ? got.value : this.#viaStore(call, src, tag, message, stored);
    });
  }

  /** Message `message` from `src` as the keyed store holds it, handed to `stored`. */
  #viaStore<T>(
    call: CallInfo,
    src: number,
    tag: number,
    message: number,
    stored: (x: Exchange) => Promise<T>,
  ): Promise<T> {
    return stored(this.#p2p(call, src, this.#group.rank, message, tag));
  }

  recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    const mailbox = this.#mailbox;
    if (!mailbox || this.#choosing.has(tag))
      return this.#receive(call, src, tag, ...this.#landing(call, tensor, src));
    // A message that is (or comes within the brief wait) next in the mailbox, inline: copied in at once.
    const message = this.#received.take(src, this.#group.rank, tag);
    const into = mailbox.receiveInto(call, src, tag, message, tensor);
    if (into === RECEIVED_INTO.landed) return COMPLETED;
    const [inline, stored] = this.#landing(call, tensor, src);
    return this.#receiveMessage(call, src, tag, message, inline, stored, into === RECEIVED_INTO.notCome);
  }

  /** What recv does with its message into `tensor`: for one that came inline, and for one in the store. */
  #landing(
    call: CallInfo,
    tensor: Tensor,
    src: number,
  ): [(record: MailRecord) => void, (x: Exchange) => Promise<void>] {
    return [
      (record) => landInline(this.#group, call, record, tensor, src),
      (x) => runExchange(x, (ex) => recv(ex, tensor, src)),
    ];
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
    const mailbox = this.#mailbox;
    let src!: number;
    let message!: number;
    let taken: { x: Exchange; value: Tensor } | undefined;
    try {
      await earlier;
      const peers = Array.from({ length: this.#group.size }, (_, p) => p).filter((p) => p !== me);
      if (mailbox) {
        src = await firstMessage(peers, call, this.#group, (p) =>
          mailbox.has(p, tag, this.#received.peek(p, me, tag)) ? p : undefined,
        );
      } else {
        const exchanges = peers.map((p) => this.#p2p(call, p, me, this.#received.peek(p, me, tag), tag));
        [src, taken] = await firstMessage(peers, call, this.#group, async (p, i) => {
          const x = exchanges[i];
          try {
            const value = await x.tryGet(0, p);
            return value && ([p, { x, value }] as const);
          } catch (error) {
            await x.abort(error);
            throw error;
          }
        });
      }
      message = this.#received.take(src, me, tag);
    } finally {
      chosen();
      if (this.#choosing.get(tag) === mine) this.#choosing.delete(tag);
    }
    if (taken) {
      const { value } = taken;
      await runExchange(taken.x, (x) => receive(x, value, tensor, src));
    } else {
      await this.#receiveMessage(call, src, tag, message, ...this.#landing(call, tensor, src));
    }
    return src;
  }

  recvBorrowed(call: CallInfo, like: Tensor, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => ({
        tensor: expectInline(this.#group, call, record, like, src).clone(),
        release: NOTHING_HELD,
      }),
      (x) =>
        this.#lend(x, src, async () => {
          const tensor = await x.get(0, src);
          x.expectLike(tensor, like, src);
          return { tensor };
        }),
    );
  }

  recvAnyBorrowed(call: CallInfo, src: number, tag: number): Promise<BorrowedTensor> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => ({ tensor: inlineTensor(record).clone(), release: NOTHING_HELD }),
      (x) => this.#lend(x, src, async () => ({ tensor: await x.get(0, src) })),
    );
  }

  sendViews(call: CallInfo, tensors: readonly Tensor[], dst: number, tag: number): Promise<void> {
    const message = this.#sent.take(this.#group.rank, dst, tag);
    return this.#sendStored(call, dst, tag, message, async (x) => {
      await x.publishViews(0, tensors, [dst]);
      await x.consumed(0);
    });
  }

  recvViews(call: CallInfo, src: number, tag: number): Promise<BorrowedViews> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => {
        const sent = `${record.dtype}[${record.shape.join(',')}]`;
        throw layoutMismatchError(this.#group, call, 'a list of views (sendViews)', src, sent);
      },
      (x) => this.#lend(x, src, async () => ({ views: await x.getViews(0, src) })),
    );
  }

  /** The sender's value as the store hands it out on `x` (`take` reads and checks it), until release(). */
  async #lend<T>(
    x: Exchange,
    src: number,
    take: () => Promise<T>,
  ): Promise<T & { release(): Promise<void> }> {
    let value: T;
    try {
      value = await take();
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

  recvAny(call: CallInfo, src: number, tag: number): Promise<Tensor> {
    return this.#receive(
      call,
      src,
      tag,
      (record) => inlineTensor(record).clone(),
      async (x) => {
        let value: Tensor | undefined;
        await runExchange(x, async (ex) => {
          value = await takeCopy(ex, 0, src);
        });
        return value!;
      },
    );
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
    let x: Exchange;
    if (pattern.kind === 'send') {
      const message = this.#sent.take(me, pattern.peer, pattern.tag);
      // The marker goes first, so the receive looks for this rank's error in the keyed store.
      await this.#mailbox?.post(call, pattern.peer, pattern.tag, message);
      x = this.#p2p(call, me, pattern.peer, message, pattern.tag);
    } else if (pattern.kind === 'recv') {
      const message = await this.#nextMessage(pattern.peer, pattern.tag);
      const mailbox = this.#mailbox;
      if (mailbox) {
        // The message this receive was for leaves the mailbox. An inline one's send waits for this
        // receive's verdict, which is this rank's error; only a stored one is answered through the store.
        const bounded = { ...call, timeoutMs: Math.min(call.timeoutMs, TELL_TIMEOUT_MS) };
        const peer = pattern.peer;
        const tag = pattern.tag;
        const told = new Error(`rank ${this.#group.ranks[me]}: ${error.message}`);
        const stored = await settled(() =>
          mailbox.receive(bounded, peer, tag, message, (record) => {
            if (record.kind === MAIL.inline) throw told;
            return true;
          }),
        ).catch(() => false);
        if (!stored) return;
      }
      x = this.#p2p(call, pattern.peer, me, message, pattern.tag);
    } else {
      x = new Exchange(this.#store, this.#group, call);
    }
    // Peers that came to the region learn the error there, the others from the markers.
    if (this.#region && call.seq >= 0) await this.#region.abandon(call, error);
    await tellPeers(this.#store, this.#group, x, call, arrivals(pattern, me, x.peers()), error);
  }

  destroy(): void {}
}

/** What releasing a message received as the receiver's own copy does: nothing. */
const NOTHING_HELD = async (): Promise<void> => {};

/** `run()` as a promise: a fast path that completes at once still answers with a promise, and fails as one. */
function settled<T>(run: () => T | Promise<T>): Promise<T> {
  try {
    return Promise.resolve(run());
  } catch (error) {
    return Promise.reject(error);
  }
}
