/**
 * Rank entry of the collectives bench: runs every requested op at every size
 * inside one job (starting rank threads costs ~0.5 s, more than a whole size).
 * Timing is taken on rank 0, batch by batch, each batch starting right after
 * a barrier so all ranks enter it together.
 */
import { type RankContext, Tensor, type ThreadGroup } from '../../index.ts';
import { median } from './median.ts';

export const COLLECTIVE_OPS = [
  'allReduce',
  'allGather',
  'reduceScatter',
  'broadcast',
  'allToAll',
  'sendRecv',
] as const;
export type CollectiveOp = (typeof COLLECTIVE_OPS)[number];

export interface RankArgs {
  ops: CollectiveOp[];
  /** Requested bytes per size; ops that split a buffer across ranks round the count to a multiple of the world size. */
  sizes: number[];
  /** Wall time to spend measuring one size, split over `batches`. */
  budgetMs: number;
  batches: number;
  /** Zero-copy destGet from rank 0 to rank 1, measured on rank 1. */
  zeroCopy?: { sizes: number[]; rounds: number };
}

export interface Sample {
  op: CollectiveOp;
  /** Bytes of the buffer nccl-tests reports: the whole buffer (allGather: the gathered output). */
  bytes: number;
  count: number;
  /** Median over batches of the time per iteration (sendRecv: the round trip). */
  us: number;
  itersPerBatch: number;
  batches: number;
}

export interface ZeroCopySample {
  bytes: number;
  /** Median destGet time, the producer having published before the clock starts. */
  destGetUs: number;
  /** Median time of copying the same view with TypedArray.set: what zero copy saves. */
  copyUs: number;
}

export interface RankResult {
  samples: Sample[];
  zeroCopy: ZeroCopySample[];
}

const FLOAT32_BYTES = 4;
/** Keeps a batch of a very fast op from running away when the probe undershoots. */
const MAX_ITERS_PER_BATCH = 100_000;
const WARMUP_MS = 300;
const WARMUP_MAX_ITERS = 10000;
const PROBES = 3;

/** Ops that cut the buffer into one piece per rank. */
const SPLIT_OPS: ReadonlySet<CollectiveOp> = new Set(['allGather', 'reduceScatter', 'allToAll']);

/** Elements of the buffer for `requested` bytes; split buffers are rounded to whole pieces, as nccl-tests does. */
function countFor(op: CollectiveOp, requested: number, n: number): number {
  const elements = Math.max(1, Math.floor(requested / FLOAT32_BYTES));
  return SPLIT_OPS.has(op) ? Math.max(n, Math.floor(elements / n) * n) : elements;
}

/** One iteration of `op` on a buffer of `count` float32 values (allocated up front, outside the timing). */
function makeStep(op: CollectiveOp, count: number, g: ThreadGroup): () => PromiseLike<unknown> {
  // Zeros: repeated in-place sums stay finite (no inf) and never hit slow denormals. Filled (Tensor.full
  // writes every element), not just allocated: a fresh buffer's pages are the kernel's one zero page until
  // written, and a peer copied out of those (a broadcast's root, allGather's inputs) twice as fast as out
  // of memory.
  const zeros = (length: number) => Tensor.full([length], 0, 'float32');
  const piece = count / g.size;
  switch (op) {
    case 'allReduce': {
      const t = zeros(count);
      return () => g.allReduce(t);
    }
    case 'broadcast': {
      const t = zeros(count);
      return () => g.broadcast(t, { src: 0 });
    }
    case 'allGather': {
      const input = zeros(piece);
      const outputs = Array.from({ length: g.size }, () => zeros(piece));
      return () => g.allGather(outputs, input);
    }
    case 'reduceScatter': {
      const input = zeros(count);
      const output = zeros(piece);
      return () => g.reduceScatterTensor(output, input);
    }
    case 'allToAll': {
      const input = zeros(count);
      const output = zeros(count);
      return () => g.allToAllSingle(output, input);
    }
    case 'sendRecv':
      return pingPong(g, zeros(count));
  }
}

/**
 * Ranks pair up (0<->1, 2<->3, ...); the even rank of a pair sends first, so
 * one iteration is a round trip. An odd rank out idles between barriers.
 */
function pingPong(g: ThreadGroup, t: Tensor): () => Promise<unknown> {
  const peer = g.rank ^ 1;
  if (peer >= g.size) return async () => {};
  if (g.rank % 2 === 0) {
    return async () => {
      await g.send(t, peer);
      await g.recv(t, peer);
    };
  }
  return async () => {
    await g.recv(t, peer);
    await g.send(t, peer);
  };
}

/** Milliseconds per iteration of `iters` back-to-back steps. */
async function timeSteps(step: () => PromiseLike<unknown>, iters: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < iters; i++) await step();
  return (performance.now() - started) / iters;
}

/** Rank 0's value on every rank: every rank must run the same number of collectives. */
async function fromRank0(g: ThreadGroup, value: number): Promise<number> {
  const t = Tensor.fromArray(new Int32Array([value]), [1], 'int32');
  await g.broadcast(t, { src: 0 });
  return t.data[0] as number;
}

/** Iterations per probe; big sizes are slow enough to need few. */
function probeIters(bytes: number): number {
  if (bytes <= 64 << 10) return 20;
  return bytes <= 4 << 20 ? 4 : 1;
}

/**
 * Small sizes need thousands of calls before V8 has optimized the whole call
 * path; timing them cold measured the interpreter. Large ones need a few
 * dozen between processes before the store's memory for them has settled
 * (a 64 MiB allReduce took 42 ms a call after 3 calls, 15 after 30). Rank 0
 * decides when to stop (by time) so every rank runs the same number of
 * collectives.
 */
async function warmUp(g: ThreadGroup, step: () => PromiseLike<unknown>, bytes: number): Promise<void> {
  const chunk = probeIters(bytes);
  const started = performance.now();
  for (let done = chunk; ; done += chunk) {
    for (let i = 0; i < chunk; i++) await step();
    const more = done < WARMUP_MAX_ITERS && performance.now() - started < WARMUP_MS;
    if ((await fromRank0(g, more ? 1 : 0)) === 0) return;
  }
}

async function measure(g: ThreadGroup, op: CollectiveOp, count: number, args: RankArgs): Promise<Sample> {
  const step = makeStep(op, count, g);
  const bytes = count * FLOAT32_BYTES;
  const warm = probeIters(bytes);
  await warmUp(g, step, bytes);
  // A timed probe sizes the batches so each size takes about budgetMs whatever the op's speed.
  await g.barrier();
  // The fastest of a few probes: one slow probe (a GC, a late tier-up) would size every batch too
  // small, and tiny batches measure the wake-up after the barrier instead of the op.
  let probeMs = Number.POSITIVE_INFINITY;
  for (let p = 0; p < PROBES; p++) probeMs = Math.min(probeMs, await timeSteps(step, warm));
  const batchMs = args.budgetMs / args.batches;
  const iters = await fromRank0(g, Math.min(MAX_ITERS_PER_BATCH, Math.max(1, Math.round(batchMs / probeMs))));
  const perIterMs: number[] = [];
  for (let b = 0; b < args.batches; b++) {
    await g.barrier();
    perIterMs.push(await timeSteps(step, iters));
  }
  return { op, bytes, count, us: median(perIterMs) * 1000, itersPerBatch: iters, batches: args.batches };
}

/**
 * Rank 0 publishes a tensor; once a barrier says it is published, rank 1 times
 * destGet (a view on rank 0's memory, so it should not depend on the size) and,
 * in rounds of their own, a TypedArray.set copy of that view: the cost zero
 * copy avoids. The copies come last because a 64 MiB copy evicts the caches
 * and a destGet right after one would pay for that.
 */
async function zeroCopy(
  ctx: RankContext,
  sizes: readonly number[],
  rounds: number,
): Promise<ZeroCopySample[]> {
  const { store, world: g } = ctx;
  const key = 'bench:zero-copy';
  const samples: ZeroCopySample[] = [];
  for (const bytes of sizes) {
    const source = ctx.rank === 0 ? Tensor.zeros([bytes / FLOAT32_BYTES], 'float32') : undefined;
    const local = ctx.rank === 1 ? new Float32Array(bytes / FLOAT32_BYTES) : undefined;
    /** Microseconds rank 1 spent in destGet, or in copying the view out when `copy` is set, per round. */
    const handshakes = async (copy: boolean): Promise<number[]> => {
      const us: number[] = [];
      for (let r = 0; r < rounds; r++) {
        if (source) await store.srcSet(key, source, 1);
        await g.barrier();
        if (local) {
          const started = performance.now();
          const view = await store.destGet(key);
          const got = performance.now();
          if (copy) local.set(view.data as Float32Array);
          us.push(copy ? (performance.now() - got) * 1000 : (got - started) * 1000);
          await store.destFinishGet(key);
        }
        if (source) await store.srcWaitUntilGetFinished(key);
      }
      return us;
    };
    // Untimed first: destGet and the barrier need dozens of calls before they are optimized.
    await handshakes(false);
    const getUs = await handshakes(false);
    const copyUs = await handshakes(true);
    if (local) samples.push({ bytes, destGetUs: median(getUs), copyUs: median(copyUs) });
  }
  return samples;
}

export default async function main(ctx: RankContext, args: RankArgs): Promise<RankResult> {
  const g = ctx.world;
  const samples: Sample[] = [];
  // A throwaway run of the first table row: the job's first measurement otherwise pays for the
  // start-up (collecting its garbage, compiling the shared call path) and reads several times slower.
  const first = args.ops[0];
  if (first) await measure(g, first, countFor(first, Math.min(...args.sizes), g.size), args);
  for (const op of args.ops) {
    // Sizes that round to the same count (split ops on 4 ranks: 4 B and 16 B) are measured once.
    const counts = new Set(args.sizes.map((bytes) => countFor(op, bytes, g.size)));
    for (const count of counts) {
      const sample = await measure(g, op, count, args);
      if (g.rank === 0) samples.push(sample);
    }
  }
  const zc =
    args.zeroCopy && g.size >= 2 ? await zeroCopy(ctx, args.zeroCopy.sizes, args.zeroCopy.rounds) : [];
  await g.barrier();
  return { samples, zeroCopy: zc };
}
