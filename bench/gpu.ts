/**
 * The GPU bench (scripts/gpu-check.sh runs it on a GPU machine): allReduce
 * between rank threads sharing one GPU, beside a device-to-device copy of the
 * same size on that GPU (the anchor: a same-GPU allReduce moves each byte
 * about twice), and NCCL allReduce across GPUs where there are two or more.
 *
 *   npx tsx bench/gpu.ts [--quick]
 */

import { cudaRuntime } from '../src/cuda/cudart.ts';
import { spawnThreads } from '../src/index.ts';
import { isMainModule } from './cli.ts';
import type { GpuBenchArgs, GpuBenchSample } from './gpu-rank.ts';
import { type Column, fixed, formatTable } from './table.ts';

const MiB = 1 << 20;
const RANK_ENTRY = new URL('./gpu-rank.ts', import.meta.url);

interface Row {
  what: string;
  ranks: number;
  bytes: number;
  sample: GpuBenchSample;
}

const COLUMNS: readonly Column<Row>[] = [
  { title: 'what', width: 30, cell: (r) => r.what },
  { title: 'ranks', width: 7, cell: (r) => String(r.ranks) },
  { title: 'size(B)', width: 12, cell: (r) => String(r.bytes) },
  { title: 'time(us)', width: 12, cell: (r) => fixed(r.sample.medianUs) },
  { title: 'algbw(GB/s)', width: 13, cell: (r) => fixed(r.sample.algbw) },
  { title: 'busbw(GB/s)', width: 13, cell: (r) => fixed(r.sample.busbw) },
];

async function measure(worldSize: number, devices: string[], args: GpuBenchArgs): Promise<GpuBenchSample> {
  const results = await spawnThreads<GpuBenchSample>(RANK_ENTRY, {
    worldSize,
    devices: devices as `cuda:${number}`[],
    args,
  });
  return results[0];
}

export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<void> {
  const quick = argv.includes('--quick');
  const devices = cudaRuntime().deviceCount();
  if (devices === 0) throw new Error('bench/gpu: no CUDA device visible');
  const sizes = quick ? [MiB] : [MiB, 16 * MiB, 64 * MiB];
  const iterations = quick ? 5 : 20;
  const rows: Row[] = [];
  for (const bytes of sizes) {
    const args = (op: GpuBenchArgs['op']): GpuBenchArgs => ({ op, bytes, iterations });
    rows.push({
      what: 'device-to-device copy (anchor)',
      ranks: 1,
      bytes,
      sample: await measure(1, ['cuda:0'], args('copy')),
    });
    rows.push({
      what: 'allReduce, one GPU (store)',
      ranks: 2,
      bytes,
      sample: await measure(2, ['cuda:0', 'cuda:0'], args('allReduce')),
    });
    if (devices >= 2) {
      rows.push({
        what: 'allReduce, two GPUs (NCCL)',
        ranks: 2,
        bytes,
        sample: await measure(2, ['cuda:0', 'cuda:1'], args('allReduce')),
      });
    }
  }
  console.log(`# tensorcomm GPU bench: ${devices} device(s), median of ${iterations} iterations`);
  console.log('# copy: algbw = bytes / time; allReduce: busbw = algbw × 2(n-1)/n');
  for (const line of formatTable(COLUMNS, rows)) console.log(line);
  for (const bytes of sizes) {
    const copy = rows.find((r) => r.bytes === bytes && r.what.startsWith('device'))!;
    const store = rows.find((r) => r.bytes === bytes && r.what.includes('one GPU'))!;
    console.log(
      `# ${bytes / MiB} MiB: same-GPU allReduce busbw / copy bandwidth = ${fixed(store.sample.busbw / copy.sample.algbw)}`,
    );
  }
}

if (isMainModule(import.meta.url)) await main();
