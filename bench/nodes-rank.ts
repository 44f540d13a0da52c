/**
 * One rank of bench/nodes.ts: ranks on two "nodes" (distinct node ids on this
 * machine, so ranks of different nodes talk over the network store's TCP)
 * measure what gloo_bench.py and mpi_bench.c measure, the same way: p2p
 * streaming between the nodes' first ranks, and allReduce as the mean of a
 * loop. Rank 0 prints the figures as one JSON line.
 *
 * Small allReduces are timed after WARMUP_CALLS untimed ones: V8 optimizes
 * the call path over its first few thousand calls (the first thousand 4 B
 * allReduces between two nodes take 300 µs or more each, from the fifth
 * thousand on 30-50 µs), and the anchors are timed warm too: gloo's
 * allReduces come after thousands of its send/recv calls, Open MPI's C needs
 * no warming. Large ones take LARGE_WARMUP_CALLS first, nccl-tests' default
 * warm-up: V8 tiers up the large-tensor path over its first calls too (2 x 1
 * at 64 MiB: 19-25 ms of user CPU per rank in calls 2 to 4, 0-7 ms from the
 * fifth on; 2 x 2: 64-100 ms per call for calls 2 and 3, 60-70 from the
 * fourth), while gloo's and Open MPI's compiled code is warm after their one
 * or two.
 */
import { initProcess, Tensor } from '../src/index.ts';

const quick = process.argv.includes('--quick');
const ctx = await initProcess();
const { rank, worldSize, world } = ctx;
const perNode = Number(process.env.LOCAL_WORLD_SIZE);
/** The first rank of the second node. */
const peer = perNode;
const figures: Record<string, number> = {};
const BIG = quick ? 1 << 22 : 1 << 26;
const WARMUP_CALLS = quick ? 500 : 5000;
const LARGE_WARMUP_CALLS = 5;
/** Up to this size an allReduce takes WARMUP_CALLS untimed calls first. */
const WARM_MAX_BYTES = 64 << 10;

/** Seconds per step, as the anchors time it: from a barrier, with one after the loop for p2p streaming. */
async function timed(
  iterations: number,
  step: () => Promise<unknown>,
  barrierAfter: boolean,
): Promise<number> {
  await world.barrier();
  const started = performance.now();
  for (let i = 0; i < iterations; i++) await step();
  if (barrierAfter) await world.barrier();
  return (performance.now() - started) / 1000 / iterations;
}

const payload = Tensor.full([BIG / 4], 1, 'float32');
const streams = Math.max(3, (256 << 20) / BIG);
if (rank === 0 || rank === peer) await (rank === 0 ? world.send(payload, peer) : world.recv(payload, 0));
const p2pSeconds = await timed(
  streams,
  async () => {
    if (rank === 0) await world.send(payload, peer);
    else if (rank === peer) await world.recv(payload, 0);
  },
  true,
);
figures[`p2p_GBps_${BIG}`] = BIG / p2pSeconds / 1e9;

for (const bytes of [4, BIG]) {
  const x = Tensor.full([bytes / 4], 1, 'float32');
  const iterations = Math.max(3, Math.min(quick ? 200 : 2000, (256 << 20) / bytes));
  const warmup = bytes <= WARM_MAX_BYTES ? WARMUP_CALLS : LARGE_WARMUP_CALLS;
  for (let i = 0; i < warmup; i++) await world.allReduce(x);
  const seconds = await timed(
    iterations,
    async () => {
      await world.allReduce(x);
    },
    false,
  );
  figures[`allreduce_us_${bytes}`] = seconds * 1e6;
  figures[`allreduce_busGBps_${bytes}`] = (bytes / seconds / 1e9) * ((2 * (worldSize - 1)) / worldSize);
}
if (rank === 0) console.log(`nodes-bench ${JSON.stringify(figures)}`);
await ctx.close();
