/**
 * One rank of bench/weight-sync.ts's nodes mode: rank 0 alone on node 0 (the
 * trainer), ranks 1, 2 and 3 on node 1 (rollouts), node ids distinct on this
 * machine so ranks of different nodes talk over the network store's TCP and
 * ranks of node 1 through its shared memory. Times a sync of the model to 1,
 * 2 and 3 of the rollouts, each loading it into a model of its own (with
 * `into`, or borrowing and `copy_`-ing each tensor in), and a
 * plain TCP copy of the same bytes from rank 0 to rank 1 (node:net, one
 * socket, read straight into the receiver's tensors): what crossing once
 * costs here. Every figure is the median over interleaved rounds, each from a
 * barrier to a barrier on all ranks, beside the CPU time the four processes
 * spent on the sync (each from the first barrier to its own end of the
 * sync, all its threads). Rank 0 prints them as one JSON line.
 */
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { median } from '../src/cli/bench/median.ts';
import { initProcess, Tensor, WeightSyncEngine } from '../src/index.ts';
import {
  type Loading,
  NODES_MODES,
  type NodesArgs,
  type NodesMode,
  type NodesSample,
} from './weight-sync-nodes.ts';
import { filledWith } from './weight-sync-rank.ts';

const TENSOR_BYTES = 8 << 20;
const args = JSON.parse(process.env.WEIGHT_SYNC_NODES_ARGS ?? '{}') as NodesArgs;
const ctx = await initProcess({ timeoutMs: 300_000 });
const { rank, world } = ctx;

/** A model of bfloat16 tensors, each filled with a byte of its own and the seed's. */
function build(seed: number): Array<[string, Tensor]> {
  const count = Math.max(1, Math.round(args.bytes / TENSOR_BYTES));
  return Array.from({ length: count }, (_, i) => {
    const t = Tensor.empty([TENSOR_BYTES / 2], 'bfloat16');
    t.bytes().fill((seed * 31 + i) & 0xff);
    return [`layers.${i}.weight`, t];
  });
}

const model = build(rank === 0 ? 1 : 0);
const engines = [1, 2, 3].map((receivers) => {
  const options = {
    senders: [0],
    receivers: Array.from({ length: receivers }, (_, i) => 1 + i),
    bucketBytes: args.bucketBytes,
    tag: 100 * receivers,
    timeoutMs: 300_000,
  };
  return options.receivers.includes(rank) || rank === 0 ? new WeightSyncEngine(world, options) : undefined;
});

const params = new Map(model);

async function sync(engine: WeightSyncEngine | undefined, loading: Loading): Promise<void> {
  if (!engine) return;
  if (engine.role === 'sender') {
    await engine.send(model);
    return;
  }
  if (loading === 'into') {
    for await (const _ of engine.receive({ into: params, borrow: true }));
    return;
  }
  for await (const [name, t] of engine.receive({ borrow: true })) params.get(name)!.copy_(t);
}

/**
 * Where the TCP copy's next bytes land on rank 1, and how many whole copies have landed: the count, not a
 * callback, since a copy's first bytes may arrive before rank 1 starts waiting for it.
 */
const landing = { at: 0, copies: 0, arrived: () => {} };
/** Copies rank 1 has waited for so far. */
let copiesWanted = 0;
const modelBytes = model.length * TENSOR_BYTES;

/**
 * Rank 0 listens, rank 1 connects: one socket between the nodes' first ranks, set up before any timing.
 * Rank 1 reads straight into its tensors (onread), so the copy is the kernel's and no more.
 */
async function tcpPair(): Promise<Socket | undefined> {
  if (rank === 0) {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    await world.sendObject((server.address() as { port: number }).port, 1);
    const [socket] = await accepted;
    server.close();
    return socket;
  }
  if (rank === 1) {
    const port = (await world.recvObject(0)) as number;
    const window = () => {
      const t = model[Math.floor(landing.at / TENSOR_BYTES)][1].bytes();
      return t.subarray(landing.at % TENSOR_BYTES);
    };
    const callback = (n: number) => {
      landing.at += n;
      if (landing.at === modelBytes) {
        landing.at = 0;
        landing.copies++;
        landing.arrived();
      }
      return true;
    };
    const socket = connect({ port, host: '127.0.0.1', onread: { buffer: window, callback } });
    await once(socket, 'connect');
    return socket;
  }
  return undefined;
}

/** The model's bytes from rank 0 to rank 1 over `socket`, landing in rank 1's tensors in order. */
async function tcpCopy(socket: Socket | undefined): Promise<void> {
  if (!socket) return;
  if (rank === 0) {
    for (const [, t] of model) if (!socket.write(t.bytes())) await once(socket, 'drain');
    return;
  }
  const want = ++copiesWanted;
  while (landing.copies < want) await new Promise<void>((resolve) => (landing.arrived = resolve));
}

/** Whether this rollout holds the trainer's model (seed 1), every byte. */
function holdsTrainerModel(): boolean {
  return model.every(([, t], i) => filledWith(t.bytes(), (31 + i) & 0xff));
}

const socket = await tcpPair();
// Round after round, every mode once a round: on a shared machine the load changes from one minute to
// the next, and interleaved rounds give every mode the same mix of it. Round 0 warms up, untimed.
const times = new Map<NodesMode, number[]>(NODES_MODES.map((m) => [m, []]));
/** This process's CPU milliseconds on each timed round of each mode. */
const cpuTimes = new Map<NodesMode, number[]>(NODES_MODES.map((m) => [m, []]));
const exact = new Map<NodesMode, boolean>(NODES_MODES.map((m) => [m, true]));
for (let round = 0; round <= args.reps; round++) {
  for (const mode of NODES_MODES) {
    const receivers = mode === 'tcp copy' ? 1 : Number(mode.slice(-1));
    const loading = mode.split(' ')[0] as Loading;
    // Stale weights on the rollouts, so each sync must deliver the whole model again.
    if (rank !== 0) for (const [, t] of model) t.bytes().fill(0);
    await world.barrier();
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    await (mode === 'tcp copy' ? tcpCopy(socket) : sync(engines[receivers - 1], loading));
    const cpu = process.cpuUsage(cpuStarted);
    await world.barrier();
    if (round > 0) {
      times.get(mode)!.push(performance.now() - started);
      cpuTimes.get(mode)!.push((cpu.user + cpu.system) / 1000);
    }
    if (rank > 0 && rank <= receivers && !holdsTrainerModel()) exact.set(mode, false);
  }
}
const everyRank = (await world.allGatherObject([...exact.values()])) as boolean[][];
/** By rank, mode and round: the CPU each process spent. */
const everyCpu = (await world.allGatherObject(NODES_MODES.map((m) => cpuTimes.get(m)!))) as number[][][];
const samples: NodesSample[] = NODES_MODES.map((mode, m) => ({
  mode,
  ms: median(times.get(mode)!),
  cpuMs: median(
    everyCpu[0][m].map((_, round) => everyCpu.reduce((sum, byMode) => sum + byMode[m][round], 0)),
  ),
  exact: everyRank.every((flags) => flags[m]),
}));
socket?.destroy();
if (rank === 0) {
  const bytes = model.length * TENSOR_BYTES;
  console.log(`weight-sync-nodes ${JSON.stringify({ bytes, samples })}`);
}
await ctx.close();
