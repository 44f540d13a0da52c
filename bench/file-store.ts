/**
 * FileTensorStore between two processes, without the collective layers on
 * top: the round trip of a 4-byte value (ping, then pong) and the GB/s of a
 * 64 MiB value received into the consumer's own tensor (what recv does),
 * printed beside gloo's p2p figures from the same run.
 *
 *   npx tsx bench/file-store.ts [--quick] [--json <file>]
 *
 * The script is also its own peer: the parent forks it twice with --peer.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createJobDirectory, FileTensorStore, removeJobDirectory } from '../src/file-store/index.ts';
import { Tensor } from '../src/index.ts';
import { runAnchors } from './anchors.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { fixed } from './table.ts';

const MiB = 2 ** 20;

interface Plan {
  roundTrips: number;
  warmupRoundTrips: number;
  transfers: number;
  transferBytes: number;
}

const FULL: Plan = { roundTrips: 5000, warmupRoundTrips: 500, transfers: 20, transferBytes: 64 * MiB };
const QUICK: Plan = { roundTrips: 300, warmupRoundTrips: 50, transfers: 3, transferBytes: 16 * MiB };

export interface FileStoreFigures {
  roundTripUs: number;
  transferBytes: number;
  transferGBps: number;
  glooRoundTripUs?: number;
  glooGBps?: number;
}

async function peer(rank: number, dir: string, plan: Plan): Promise<Partial<FileStoreFigures>> {
  const store = new FileTensorStore({ dir, rank, timeoutMs: 60_000 });
  try {
    const small = Tensor.fromArray(new Int32Array([rank]));
    const pingPong = async (i: number) => {
      if (rank === 0) {
        await store.srcSet(`ping:${i}`, small, 1);
        await store.destGet(`pong:${i}`);
        await store.destFinishGet(`pong:${i}`);
        await store.srcWaitUntilGetFinished(`ping:${i}`);
      } else {
        await store.destGet(`ping:${i}`);
        await store.destFinishGet(`ping:${i}`);
        await store.srcSet(`pong:${i}`, small, 1);
        await store.srcWaitUntilGetFinished(`pong:${i}`);
      }
    };
    for (let i = 0; i < plan.warmupRoundTrips; i++) await pingPong(-1 - i);
    let started = performance.now();
    for (let i = 0; i < plan.roundTrips; i++) await pingPong(i);
    const roundTripUs = ((performance.now() - started) * 1000) / plan.roundTrips;

    const big = Tensor.full([plan.transferBytes / 4], rank + 1, 'float32');
    const transfer = async (i: number) => {
      if (rank === 0) {
        await store.srcSet(`big:${i}`, big, 1);
        await store.srcWaitUntilGetFinished(`big:${i}`);
      } else {
        const value = await store.destGet(`big:${i}`);
        big.bytes().set(value.bytes());
        await store.destFinishGet(`big:${i}`);
      }
    };
    await transfer(-1);
    started = performance.now();
    for (let i = 0; i < plan.transfers; i++) await transfer(i);
    const seconds = (performance.now() - started) / 1000;
    if (rank === 1 && big.data[0] !== 1) throw new Error(`received ${big.data[0]}, expected 1`);
    return {
      roundTripUs,
      transferBytes: plan.transferBytes,
      transferGBps: (plan.transfers * plan.transferBytes) / seconds / 1e9,
    };
  } finally {
    store.close();
  }
}

function runPeer(rank: number, dir: string, plan: Plan): Promise<Partial<FileStoreFigures>> {
  const child = fork(fileURLToPath(import.meta.url), ['--peer', String(rank), dir, JSON.stringify(plan)], {
    execArgv: ['--import', 'tsx'],
  });
  return new Promise((resolve, reject) => {
    let result: Partial<FileStoreFigures> | undefined;
    child.on('message', (message) => (result = message as Partial<FileStoreFigures>));
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
    const [first] = await Promise.all([runPeer(0, dir, plan), runPeer(1, dir, plan)]);
    figures = first as FileStoreFigures;
  } finally {
    removeJobDirectory(dir);
  }
  const gloo = (await runAnchors({ quick: options.quick, log: () => {} })).gloo;
  figures.glooRoundTripUs = gloo.figures?.p2p_rtt_us;
  figures.glooGBps = gloo.figures?.p2p_GBps_67108864;
  const anchor = (value: number | undefined, unit: string) =>
    value === undefined ? `gloo: ${gloo.skipped ?? 'no figure'}` : `gloo ${fixed(value)} ${unit}`;
  log(`# FileTensorStore between two processes in ${dir}${options.quick ? ' (--quick)' : ''}`);
  log(`round trip 4 B         ${fixed(figures.roundTripUs)} us   (${anchor(figures.glooRoundTripUs, 'us')})`);
  log(
    `transfer ${plan.transferBytes / MiB} MiB         ${fixed(figures.transferGBps, 3)} GB/s (${anchor(figures.glooGBps, 'GB/s')})`,
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
