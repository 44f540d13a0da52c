/**
 * P2P messaging between two thread workers: messages/s for small dict
 * messages and GB/s for a 64 MiB tensor list, each printed beside the
 * ThreadGroup send/recv figure of the same run (the layer p2p is built on).
 *
 *   npx tsx bench/p2p.ts [--quick] [--json <file>]
 */
import { spawnThreads } from '../src/index.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import type { P2PRankArgs, P2PSample } from './p2p-rank.ts';
import { type Column, fixed, formatTable } from './table.ts';

export type { P2PSample };

const MiB = 2 ** 20;
const FULL: P2PRankArgs = {
  batch: 200,
  batches: 20,
  warmupBatches: 20,
  listLength: 16,
  listElements: (4 * MiB) / 4,
  rounds: 5,
};
const QUICK: P2PRankArgs = {
  batch: 50,
  batches: 2,
  warmupBatches: 2,
  listLength: 4,
  listElements: MiB / 4,
  rounds: 2,
};

const COLUMNS: Column<P2PSample>[] = [
  { title: 'path', width: 44, cell: (s) => s.path.padEnd(43) },
  { title: 'message', width: 34, cell: (s) => s.message.padEnd(33) },
  { title: 'count', width: 7, cell: (s) => String(s.messages) },
  { title: 'msgs/s', width: 11, cell: (s) => fixed(s.messages / s.seconds, 0) },
  { title: 'GB/s', width: 9, cell: (s) => fixed(s.bytes / s.seconds / 1e9, 3) },
];

export async function runP2PBench(options: { quick?: boolean; log?: Log } = {}): Promise<P2PSample[]> {
  const log = options.log ?? console.log;
  const args = options.quick ? QUICK : FULL;
  const results = await spawnThreads<P2PSample[]>(new URL('./p2p-rank.ts', import.meta.url), {
    worldSize: 2,
    names: ['sender', 'receiver'],
    args,
    timeoutMs: 300_000,
  });
  const samples = results[1];
  log(`# p2p between two thread workers, sender -> receiver${options.quick ? ' (--quick)' : ''}`);
  log(
    `# small messages: ${args.batch} in flight per batch; tensor list: ${(args.listLength * args.listElements * 4) / MiB} MiB`,
  );
  for (const line of formatTable(COLUMNS, samples)) log(line);
  return samples;
}

export const main = benchMain('bench/p2p.ts', runP2PBench);

if (isMainModule(import.meta.url)) await main();
