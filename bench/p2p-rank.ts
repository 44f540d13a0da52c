/**
 * Rank entry of the p2p bench: worker "sender" streams messages to worker
 * "receiver" on each path in turn; the receiver times each path from a
 * barrier to its last receive, so every figure includes delivery. The
 * ThreadGroup rows are the anchors: the same bytes over the layer p2p uses.
 */
import { type RankContext, Tensor, Work } from '../src/index.ts';

export interface P2PRankArgs {
  /** Small messages per batch (in flight at once) and batches per path. */
  batch: number;
  batches: number;
  warmupBatches: number;
  /** The large message: `listLength` float32 tensors of `listElements` each. */
  listLength: number;
  listElements: number;
  rounds: number;
}

export interface P2PSample {
  path: string;
  message: string;
  messages: number;
  bytes: number;
  seconds: number;
}

type Path = {
  path: string;
  message: string;
  bytes: number;
  count: number;
  send: () => Work<unknown>;
  recv: () => Work<unknown>;
};

export default async function main(ctx: RankContext, args: P2PRankArgs): Promise<P2PSample[]> {
  const sender = ctx.name === 'sender';
  const peer = sender ? 1 : 0;
  const g = await ctx.collective.createCollectiveGroup(['sender', 'receiver']);
  const tg = ctx.manager.getGroup([0, 1]);
  const small = Tensor.arange(16, 'float32');
  const smallInto = Tensor.empty([16], 'float32');
  const dict = { step: 1, name: 'policy', w: small };
  const list = Array.from({ length: args.listLength }, (_, i) =>
    Tensor.full([args.listElements], i, 'float32'),
  );
  const listInto = list.map(() => Tensor.empty([args.listElements], 'float32'));
  const listBytes = args.listLength * args.listElements * 4;
  const listName = `${args.listLength} x float32[${args.listElements}]`;
  const all = (works: Array<Work<unknown>>) => Promise.all(works);
  const paths: Path[] = [
    {
      path: 'CollectiveGroup.send/recv',
      message: 'dict{step,name,float32[16]}',
      bytes: 64,
      count: args.batch,
      send: () => g.send(dict),
      recv: () => g.recv(),
    },
    {
      path: 'CollectiveGroup.sendTensor/recvTensor',
      message: 'float32[16]',
      bytes: 64,
      count: args.batch,
      send: () => g.sendTensor(small),
      recv: () => g.recvTensor(smallInto),
    },
    {
      path: 'ThreadGroup.send/recv (anchor)',
      message: 'float32[16]',
      bytes: 64,
      count: args.batch,
      send: () => tg.send(small, peer),
      recv: () => tg.recv(smallInto, peer),
    },
    {
      path: 'ThreadGroup.sendObject/recvObject (anchor)',
      message: 'dict{step,name,Float32Array(16)}',
      bytes: 64,
      count: args.batch,
      send: () => tg.sendObject({ ...dict, w: small.data }, peer),
      recv: () => tg.recvObject(peer),
    },
    {
      path: 'CollectiveGroup.send/recv',
      message: listName,
      bytes: listBytes,
      count: 1,
      send: () => g.send(list),
      recv: () => g.recv(),
    },
    {
      path: 'ThreadGroup.send/recv (anchor)',
      message: listName,
      bytes: listBytes,
      count: 1,
      send: () => new Work(all(list.map((t) => tg.send(t, peer)))),
      recv: () => new Work(all(listInto.map((t) => tg.recv(t, peer)))),
    },
    {
      // What recv() must do: it cannot know the receiver's buffers, so it allocates (and faults in) new ones.
      path: 'ThreadGroup.send/recv, new buffers (anchor)',
      message: listName,
      bytes: listBytes,
      count: 1,
      send: () => new Work(all(list.map((t) => tg.send(t, peer)))),
      recv: () => new Work(all(list.map((t) => tg.recv(Tensor.empty(t.shape, 'float32'), peer)))),
    },
    {
      path: 'CollectiveGroup.sendTensor/recvTensor',
      message: listName,
      bytes: listBytes,
      count: 1,
      send: () => new Work(all(list.map((t) => g.sendTensor(t)))),
      recv: () => new Work(all(listInto.map((t) => g.recvTensor(t)))),
    },
  ];
  const samples: P2PSample[] = [];
  for (const p of paths) {
    const repeats = p.count === 1 ? args.rounds : args.batches;
    // Warm-up: first use builds groups and buffers, and small messages need a few thousand to get JIT-compiled.
    for (let w = 0; w < (p.count === 1 ? 1 : args.warmupBatches); w++) await run(p, p.count);
    await ctx.world.barrier();
    const started = performance.now();
    for (let r = 0; r < repeats; r++) await run(p, p.count);
    const seconds = (performance.now() - started) / 1000;
    const messages = repeats * p.count;
    samples.push({ path: p.path, message: p.message, messages, bytes: messages * p.bytes, seconds });
  }
  return sender ? [] : samples;

  function run(p: Path, count: number) {
    return all(Array.from({ length: count }, () => (sender ? p.send() : p.recv())));
  }
}
