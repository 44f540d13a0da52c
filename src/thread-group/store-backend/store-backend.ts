/**
 * StoreBackend: every ThreadGroup call over any TensorStore (memory store for
 * threads, file store for processes, same-GPU ranks). It assumes nothing about
 * the medium beyond the four-step handshake.
 */
import type { TensorStore } from '../../runtime/tensor-store.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type {
  ArrivalPattern,
  Backend,
  BorrowedTensor,
  BorrowedViews,
  CallInfo,
  GroupView,
} from '../backend.ts';
import { allReduce } from './all-reduce.ts';
import { allToAll, splitRows } from './all-to-all.ts';
import { ABANDONED, Exchange, runExchange } from './exchange.ts';
import { allGather, allGatherInto, reduceScatter, reduceScatterTensor } from './gather-scatter.ts';
import { recv, StreamCounters, send } from './p2p.ts';
import { broadcast, broadcastCompared, gather, reduce, scatter } from './rooted.ts';
import { allGatherAny, broadcastAny, broadcastAnyCompared, takeCopy } from './variable.ts';

/** Tag compared between the two ends of a point-to-point message; shapes are checked separately. */
const P2P_SIGNATURE = 'p2p';

export class StoreBackend implements Backend {
  readonly #store: TensorStore;
  readonly #group: GroupView;
  readonly #sent = new StreamCounters();
  readonly #received = new StreamCounters();

  constructor(store: TensorStore, group: GroupView) {
    this.#store = store;
    this.#group = group;
  }

  get lendsViews(): boolean {
    return this.#store.srcSetViews !== undefined && this.#store.destGetViews !== undefined;
  }

  #run(call: CallInfo, algorithm: (x: Exchange) => Promise<void>): Promise<void> {
    return runExchange(new Exchange(this.#store, this.#group, call), algorithm);
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

  allReduce(call: CallInfo, tensor: Tensor, op: ReduceOp): Promise<void> {
    return this.#run(call, (x) => allReduce(x, tensor, op));
  }

  broadcast(call: CallInfo, tensor: Tensor, src: number): Promise<void> {
    if (call.checks === false) return this.#run(call, (x) => broadcast(x, tensor, src));
    return this.#run(call, (x) => broadcastCompared(x, tensor, src));
  }

  reduce(call: CallInfo, tensor: Tensor, dst: number, op: ReduceOp): Promise<void> {
    return this.#runCompared(call, (x) => reduce(x, tensor, dst, op));
  }

  allGather(call: CallInfo, outputs: readonly Tensor[], input: Tensor): Promise<void> {
    return this.#run(call, (x) => allGather(x, outputs, input));
  }

  allGatherInto(call: CallInfo, output: Tensor, input: Tensor): Promise<void> {
    return this.#run(call, (x) => allGatherInto(x, output, input));
  }

  reduceScatter(call: CallInfo, output: Tensor, inputs: readonly Tensor[], op: ReduceOp): Promise<void> {
    return this.#runCompared(call, (x) => reduceScatter(x, output, inputs, op));
  }

  reduceScatterTensor(call: CallInfo, output: Tensor, input: Tensor, op: ReduceOp): Promise<void> {
    return this.#run(call, (x) => reduceScatterTensor(x, output, input, op));
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

  send(call: CallInfo, tensor: Tensor, dst: number, tag: number): Promise<void> {
    const x = this.#p2p(call, this.#group.rank, dst, this.#sent.take(this.#group.rank, dst, tag), tag);
    return runExchange(x, (ex) => send(ex, tensor));
  }

  recv(call: CallInfo, tensor: Tensor, src: number, tag: number): Promise<void> {
    const x = this.#p2p(call, src, this.#group.rank, this.#received.take(src, this.#group.rank, tag), tag);
    return runExchange(x, (ex) => recv(ex, tensor, src));
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
      await ex.publishViews(0, tensors, 1);
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
    const x = this.#p2p(call, src, this.#group.rank, this.#received.take(src, this.#group.rank, tag), tag);
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
    const x = this.#p2p(call, src, this.#group.rank, this.#received.take(src, this.#group.rank, tag), tag);
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

  /**
   * Takes part in the first exchange of a call that failed its local checks,
   * publishing a marker where data was due and failing what it would read, so
   * every peer fails at once with this rank's error instead of timing out.
   * With fingerprints on, every collective's first exchange is every rank to every rank.
   */
  async abandon(call: CallInfo, given: ArrivalPattern, error: Error): Promise<void> {
    const p2p = given.kind === 'send' || given.kind === 'recv';
    const pattern: ArrivalPattern = call.checks !== false && !p2p ? { kind: 'all' } : given;
    const me = this.#group.rank;
    const size = this.#group.size;
    const marker = Tensor.empty([0], 'uint8');
    const signature = `${ABANDONED}${error.message}`;
    const x =
      pattern.kind === 'send'
        ? this.#p2p(call, me, pattern.peer, this.#sent.take(me, pattern.peer, pattern.tag), pattern.tag)
        : pattern.kind === 'recv'
          ? this.#p2p(call, pattern.peer, me, this.#received.take(pattern.peer, me, pattern.tag), pattern.tag)
          : new Exchange(this.#store, this.#group, call);
    const peers = x.peers();
    const publishes: Array<{ consumers: number; consumer?: number }> = [];
    const reads: Array<{ producer: number; consumer?: number }> = [];
    switch (pattern.kind) {
      case 'all':
        publishes.push({ consumers: size - 1 });
        reads.push(...peers.map((producer) => ({ producer })));
        break;
      case 'pairwise':
        publishes.push(...peers.map((consumer) => ({ consumers: 1, consumer })));
        reads.push(...peers.map((producer) => ({ producer, consumer: me })));
        break;
      case 'fromRoot':
        if (me === pattern.root) publishes.push({ consumers: size - 1 });
        else reads.push({ producer: pattern.root });
        break;
      case 'fromRootPairwise':
        if (me === pattern.root) publishes.push(...peers.map((consumer) => ({ consumers: 1, consumer })));
        else reads.push({ producer: pattern.root, consumer: me });
        break;
      case 'toRoot':
        if (me === pattern.root) reads.push(...peers.map((producer) => ({ producer })));
        else publishes.push({ consumers: 1 });
        break;
      case 'send':
        publishes.push({ consumers: 1 });
        break;
      case 'recv':
        reads.push({ producer: pattern.peer });
        break;
    }
    const short = { ...call, timeoutMs: Math.min(call.timeoutMs, 5_000) };
    const done: Array<Promise<unknown>> = [];
    for (const p of publishes) {
      const key = x.key(0, me, p.consumer);
      await this.#store.srcSet(key, marker, p.consumers, { tag: signature });
      done.push(this.#store.srcWaitUntilGetFinished(key, short).catch(() => {}));
    }
    for (const r of reads) {
      const key = x.key(0, r.producer, r.consumer);
      done.push(
        this.#store
          .destGet(key, short)
          .then(() =>
            this.#store.destFinishGet(key, { error: `rank ${this.#group.ranks[me]}: ${error.message}` }),
          )
          .catch(() => {}),
      );
    }
    await Promise.all(done);
  }

  destroy(): void {}
}
