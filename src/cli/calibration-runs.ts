/**
 * Timed calls between two ranks on each of this machine's backends, for
 * calibration (`tensorcomm predict calibrate`) and bench/predict.ts: rank
 * threads over the memory store, rank processes of one node over the file
 * store's rings, and one rank on each of two "nodes" of one job over loopback
 * TCP (two launchers in this process, so the ranks' node ids differ and they
 * meet through the network store). The ranks run `tensorcomm bench`'s entry
 * (bench/collectives-rank.ts): its warm-up, probe and median of batches.
 */
import { createServer } from 'node:net';
import { launchProcesses, spawnThreads } from '../index.ts';
import type { AlphaBetaOp } from '../predict/alpha-beta.ts';
import type { CollectiveOp, RankArgs, RankResult } from './bench/collectives-rank.ts';

export const CALIBRATION_BACKENDS = ['threads', 'processes', 'nodes'] as const;
export type CalibrationBackend = (typeof CALIBRATION_BACKENDS)[number];

/** What each backend is, in the tables. */
export const BACKEND_LABELS: Record<CalibrationBackend, string> = {
  threads: '2 thread ranks (memory store)',
  processes: '2 processes (file store rings)',
  nodes: '2 nodes over loopback TCP',
};

/** The alpha-beta model's name for each op the ranks time (a ping-pong is two sends). */
export const MODEL_OPS: Record<CollectiveOp, AlphaBetaOp> = {
  allReduce: 'allReduce',
  allGather: 'allGather',
  reduceScatter: 'reduceScatter',
  broadcast: 'broadcast',
  allToAll: 'allToAll',
  sendRecv: 'send',
};

export interface MeasureOptions {
  ops: readonly CollectiveOp[];
  /** Bytes as nccl-tests counts them (the rank entry rounds split buffers to whole pieces). */
  sizes: readonly number[];
  /** Wall time per size, split over `batches`; the median batch is kept. */
  budgetMs: number;
  batches: number;
}

/** One measured call: sendRecv's time is one way (half the round trip), as the model's send. */
export interface MeasuredCall {
  op: CollectiveOp;
  bytes: number;
  us: number;
}

/** The rank entry `tensorcomm bench` runs: .ts from source, .js once built. */
const RANK_ENTRY = new URL(
  `./bench/collectives-rank${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
  import.meta.url,
);

/** A stuck call fails the measurement with a message rather than hanging it. */
const COLLECTIVE_TIMEOUT_MS = 120_000;
/** How long the two launchers of a nodes job wait for each other. */
const JOIN_TIMEOUT_MS = 60_000;
/** A whole job; the largest default sizes take seconds. */
const JOB_TIMEOUT_MS = 600_000;

/** A loopback port nobody listens on now: node 0's launcher serves the job's rendezvous on it. */
async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function rankZero(backend: CalibrationBackend, args: RankArgs): Promise<RankResult> {
  const job = { args, collectiveTimeoutMs: COLLECTIVE_TIMEOUT_MS, timeoutMs: JOB_TIMEOUT_MS };
  if (backend === 'threads') return (await spawnThreads<RankResult>(RANK_ENTRY, { worldSize: 2, ...job }))[0];
  if (backend === 'processes')
    return (await launchProcesses<RankResult>(RANK_ENTRY, { nproc: 2, ...job }))[0];
  const masterPort = await freeLoopbackPort();
  const [node0] = await Promise.all(
    [0, 1].map((nodeRank) =>
      launchProcesses<RankResult>(RANK_ENTRY, {
        nproc: 1,
        nnodes: 2,
        nodeRank,
        masterPort,
        joinTimeoutMs: JOIN_TIMEOUT_MS,
        ...job,
      }),
    ),
  );
  return node0[0];
}

/** Every op at every size between two ranks of `backend`, in one job. */
export async function measureBackend(
  backend: CalibrationBackend,
  options: MeasureOptions,
): Promise<MeasuredCall[]> {
  const { samples } = await rankZero(backend, {
    ops: [...options.ops],
    sizes: [...options.sizes],
    budgetMs: options.budgetMs,
    batches: options.batches,
  });
  return samples.map((s) => ({ op: s.op, bytes: s.bytes, us: s.op === 'sendRecv' ? s.us / 2 : s.us }));
}
