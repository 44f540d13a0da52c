/**
 * FileTensorStore between two processes, without the collective layers on
 * top: the round trip of a 4-byte value (ping, then pong) with the CPU time
 * both processes spent on it, through the file handshake and through the
 * rings, and the GB/s of a 64 MiB value received into the consumer's own
 * tensor (what recv does), through the producer's shared arena, through a
 * file per value (arenas off), and through the rings, printed beside gloo's
 * p2p figures from the same run. Figures are medians: of blocks
 * of round trips, and of single transfers (the machines are shared and noisy).
 *
 *   npx tsx bench/file-store.ts [--quick] [--json <file>]
 *
 * The script is also its own peer: the parent forks it twice with --peer.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median } from '../src/cli/bench/median.ts';
import { createJobDirectory, FileTensorStore, removeJobDirectory } from '../src/file-store/index.ts';
import { Tensor } from '../src/index.ts';
import type { StoreSetOptions, StoreWaitOptions } from '../src/runtime/tensor-store.ts';
import { runAnchors } from './anchors.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { fixed } from './table.ts';

const MiB = 2 ** 20;

interface Plan {
  roundTrips: number;
  warmupRoundTrips: number;
  /** Round trips are timed in this many blocks; the figure is the median block. */
  blocks: number;
  transfers: number;
  transferBytes: number;
}

const FULL: Plan = {
  roundTrips: 5000,
  warmupRoundTrips: 500,
  blocks: 10,
  transfers: 20,
  transferBytes: 64 * MiB,
};
const QUICK: Plan = {
  roundTrips: 300,
  warmupRoundTrips: 50,
  blocks: 3,
  transfers: 3,
  transferBytes: 16 * MiB,
};

export interface FileStoreFigures {
  /** The file handshake: values that name neither end (a TensorPromise's, a bare store user's). */
  roundTripUs: number;
  /** CPU time (user + system) of both processes per round trip. */
  roundTripCpuUs: number;
  /** The rings: values whose producer and consumer name each other (every collective and send). */
  ringRoundTripUs: number;
  ringRoundTripCpuUs: number;
  transferBytes: number;
  /** Through the producer's shared arena. */
  transferGBps: number;
  /** Through a fresh file per value (arenas off): the path large values took before arenas. */
  fileTransferGBps: number;
  /** Through the rings into the consumer's tensor: copied out of the producer's memory where the system allows it. */
  ringTransferGBps: number;
  glooRoundTripUs?: number;
  glooGBps?: number;
}

interface PeerFigures {
  roundTripUs: number;
  roundTripCpuUs: number;
  ringRoundTripUs: number;
  ringRoundTripCpuUs: number;
  transferGBps: number;
  fileTransferGBps: number;
  ringTransferGBps: number;
}

/** How one path names the other end: not at all (the file handshake), or both ways (the rings). */
interface Naming {
  set: StoreSetOptions;
  get: StoreWaitOptions;
}

async function peer(rank: number, dir: string, plan: Plan): Promise<PeerFigures> {
  const store = new FileTensorStore({ dir, rank, timeoutMs: 60_000 });
  // Rank 0 also publishes through a store without arenas; rank 1 reads both kinds with its one store.
  const fileStore =
    rank === 0 ? new FileTensorStore({ dir, rank, timeoutMs: 60_000, maxArenaBytes: 0 }) : store;
  const ringStore = new FileTensorStore({
    dir,
    rank,
    timeoutMs: 60_000,
    rings: { ranks: [0, 1], spin: true },
  });
  const anonymous: Naming = { set: {}, get: {} };
  const named: Naming = { set: { to: [1 - rank] }, get: { from: 1 - rank } };
  try {
    const small = Tensor.fromArray(new Int32Array([rank]));
    const roundTrips = async (on: FileTensorStore, name: string, naming: Naming) => {
      const pingPong = async (i: number) => {
        if (rank === 0) {
          await on.srcSet(`${name}ping:${i}`, small, 1, naming.set);
          await on.destGet(`${name}pong:${i}`, naming.get);
          await on.destFinishGet(`${name}pong:${i}`);
          await on.srcWaitUntilGetFinished(`${name}ping:${i}`);
        } else {
          await on.destGet(`${name}ping:${i}`, naming.get);
          await on.destFinishGet(`${name}ping:${i}`);
          await on.srcSet(`${name}pong:${i}`, small, 1, naming.set);
          await on.srcWaitUntilGetFinished(`${name}pong:${i}`);
        }
      };
      for (let i = 0; i < plan.warmupRoundTrips; i++) await pingPong(-1 - i);
      const perBlock = Math.ceil(plan.roundTrips / plan.blocks);
      const blockUs: number[] = [];
      const cpuStart = process.cpuUsage();
      for (let block = 0, i = 0; block < plan.blocks; block++) {
        const started = performance.now();
        for (let end = i + perBlock; i < end; i++) await pingPong(i);
        blockUs.push(((performance.now() - started) * 1000) / perBlock);
      }
      const cpu = process.cpuUsage(cpuStart);
      return { us: median(blockUs), cpuUs: (cpu.user + cpu.system) / (perBlock * plan.blocks) };
    };
    const files = await roundTrips(store, 'f', anonymous);
    const rings = await roundTrips(ringStore, 'r', named);

    const big = Tensor.full([plan.transferBytes / 4], rank + 1, 'float32');
    const transfers = async (producer: FileTensorStore, name: string, naming: Naming): Promise<number> => {
      const consumer = producer === fileStore ? store : producer;
      const seconds: number[] = [];
      for (let i = -1; i < plan.transfers; i++) {
        const key = `${name}:${i}`;
        const started = performance.now();
        if (rank === 0) {
          await producer.srcSet(key, big, 1, naming.set);
          await producer.srcWaitUntilGetFinished(key);
        } else {
          // What recv does: the value may land in the receiver's own tensor, else it is copied there.
          if (naming.get.from !== undefined) consumer.landIn(key, big, { from: naming.get.from });
          const value = await consumer.destGet(key, naming.get);
          if (value.data.buffer !== big.data.buffer) big.bytes().set(value.bytes());
          await consumer.destFinishGet(key);
        }
        // The first one (i = -1) creates and faults in the arena: a warm-up, not timed.
        if (i >= 0) seconds.push((performance.now() - started) / 1000);
      }
      if (rank === 1 && big.data[0] !== 1) throw new Error(`received ${big.data[0]}, expected 1`);
      big.fill_(rank + 1);
      return plan.transferBytes / median(seconds) / 1e9;
    };
    const transferGBps = await transfers(store, 'arena', anonymous);
    const fileTransferGBps = await transfers(fileStore, 'file', anonymous);
    const ringTransferGBps = await transfers(ringStore, 'ring', named);
    return {
      roundTripUs: files.us,
      roundTripCpuUs: files.cpuUs,
      ringRoundTripUs: rings.us,
      ringRoundTripCpuUs: rings.cpuUs,
      transferGBps,
      fileTransferGBps,
      ringTransferGBps,
    };
  } finally {
    store.close();
    fileStore.close();
    ringStore.close();
  }
}

function runPeer(rank: number, dir: string, plan: Plan): Promise<PeerFigures> {
  const child = fork(fileURLToPath(import.meta.url), ['--peer', String(rank), dir, JSON.stringify(plan)], {
    execArgv: ['--import', 'tsx'],
  });
  return new Promise((resolve, reject) => {
    let result: PeerFigures | undefined;
    child.on('message', (message) => (result = message as PeerFigures));
    child.on('error', reject);
    child.on('exit', (code) =>
      result ? resolve(result) : reject(new Error(`bench peer ${rank} exited with code ${code}`)),
    );
  });
}

export async function runFileStoreBench(
  options: { quick?: boolean; log?: Log } = {},
): Promise<FileStoreFigures> {
  const log = options.log ?? console.log;
  const plan = options.quick ? QUICK : FULL;
  const dir = createJobDirectory({ jobId: `bench-${process.pid}` });
  let figures: FileStoreFigures;
  try {
    // Rank 0 times the transfers from its srcSet to the consumer's finish; rank 1's clock starts later.
    const [producer, consumer] = await Promise.all([runPeer(0, dir, plan), runPeer(1, dir, plan)]);
    figures = {
      roundTripUs: producer.roundTripUs,
      roundTripCpuUs: producer.roundTripCpuUs + consumer.roundTripCpuUs,
      ringRoundTripUs: producer.ringRoundTripUs,
      ringRoundTripCpuUs: producer.ringRoundTripCpuUs + consumer.ringRoundTripCpuUs,
      transferBytes: plan.transferBytes,
      transferGBps: producer.transferGBps,
      fileTransferGBps: producer.fileTransferGBps,
      ringTransferGBps: producer.ringTransferGBps,
    };
  } finally {
    removeJobDirectory(dir);
  }
  const gloo = (await runAnchors({ quick: options.quick, log: () => {} })).gloo;
  figures.glooRoundTripUs = gloo.figures?.p2p_rtt_us;
  figures.glooGBps = gloo.figures?.p2p_GBps_67108864;
  const anchor = (value: number | undefined, unit: string) =>
    value === undefined ? `gloo: ${gloo.skipped ?? 'no figure'}` : `gloo ${fixed(value)} ${unit}`;
  log(`# FileTensorStore between two processes in ${dir}${options.quick ? ' (--quick)' : ''}`);
  log(
    `round trip 4 B, files     ${fixed(figures.roundTripUs)} us   (${anchor(figures.glooRoundTripUs, 'us')}; ` +
      `CPU ${fixed(figures.roundTripCpuUs)} us per round trip, both processes)`,
  );
  log(
    `round trip 4 B, rings     ${fixed(figures.ringRoundTripUs)} us   ` +
      `(CPU ${fixed(figures.ringRoundTripCpuUs)} us per round trip, both processes)`,
  );
  log(
    `transfer ${plan.transferBytes / MiB} MiB, arena   ${fixed(figures.transferGBps, 3)} GB/s (${anchor(figures.glooGBps, 'GB/s')})`,
  );
  log(
    `transfer ${plan.transferBytes / MiB} MiB, files   ${fixed(figures.fileTransferGBps, 3)} GB/s (arenas off)`,
  );
  log(
    `transfer ${plan.transferBytes / MiB} MiB, rings   ${fixed(figures.ringTransferGBps, 3)} GB/s ` +
      '(landing in the receiver: copied out of the producer where the system allows it)',
  );
  return figures;
}

export const main = benchMain('bench/file-store.ts', runFileStoreBench);

if (process.argv[2] === '--peer') {
  const [, , , rank, dir, plan] = process.argv;
  peer(Number(rank), dir, JSON.parse(plan) as Plan).then(
    (figures) => process.send?.(figures, () => process.exit(0)),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
} else if (isMainModule(import.meta.url)) {
  await main();
}
