/**
 * Compression over a slow link: a 64 MiB bfloat16 tensor that is 90% zeros and
 * a random one, sent between two thread workers over an emulated 1 Gbit/s
 * link (real mode: sends wait for the link), raw vs lz4 vs zstd; then each
 * codec's own throughput on the same bytes. Goals, as ratios to raw from the
 * same run: >= 4x faster on the sparse tensor, <= 5% slower on the random one.
 *
 *   npx tsx bench/compression.ts [--quick] [--json <file>]
 */
import { loadClusterConfig, spawnThreads } from '../src/index.ts';
import { createCodec } from '../src/p2p/compression/codecs.ts';
import { CHUNK_BYTES } from '../src/p2p/compression/tensor-compressor.ts';
import type { TensorCompressionConfig } from '../src/runtime/config/cluster-config.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { benchTensor, type CompressionRankArgs, type CompressionSample } from './compression-rank.ts';
import { type Column, fixed, formatTable } from './table.ts';

const MiB = 2 ** 20;
const LINK_MBPS = 1000;
const FULL: CompressionRankArgs = { numel: 32 * MiB, rounds: 3 };
const QUICK: CompressionRankArgs = { numel: 4 * MiB, rounds: 1 };
const CODECS = ['raw', 'lz4', 'zstd'] as const;

export interface CompressionRow extends CompressionSample {
  codec: (typeof CODECS)[number];
  /** Raw time / this time: above 1 is faster than raw. */
  speedup: number;
}

export interface CodecThroughput {
  codec: 'lz4' | 'zstd';
  tensor: 'sparse' | 'random';
  ratio: number;
  compressGBps: number;
  decompressGBps: number;
}

export interface CompressionReport {
  rows: CompressionRow[];
  codecs: CodecThroughput[];
  goals: { sparseSpeedup: number; randomSlowdown: number };
}

const ROWS: Column<CompressionRow>[] = [
  { title: 'tensor', width: 8, cell: (r) => r.tensor.padEnd(7) },
  { title: 'codec', width: 6, cell: (r) => r.codec.padEnd(5) },
  { title: 'wire MiB', width: 10, cell: (r) => fixed(r.wireBytes / MiB, 2) },
  { title: 'seconds', width: 9, cell: (r) => fixed(r.seconds, 3) },
  { title: 'x raw', width: 7, cell: (r) => fixed(r.speedup, 2) },
];

const CODEC_ROWS: Column<CodecThroughput>[] = [
  { title: 'codec', width: 6, cell: (r) => r.codec.padEnd(5) },
  { title: 'tensor', width: 8, cell: (r) => r.tensor.padEnd(7) },
  { title: 'ratio', width: 7, cell: (r) => fixed(r.ratio, 2) },
  { title: 'compress GB/s', width: 14, cell: (r) => fixed(r.compressGBps, 3) },
  { title: 'decompress GB/s', width: 16, cell: (r) => fixed(r.decompressGBps, 3) },
];

function configFor(codec: (typeof CODECS)[number]) {
  return loadClusterConfig({
    cluster: {
      ...(codec === 'raw' ? {} : { collective: { tensor_compression: { codec } } }),
      net_emulation: {
        mode: 'real',
        groups: {
          all: { workers: ['sender', 'receiver'], uplink_mbps: LINK_MBPS, downlink_mbps: LINK_MBPS },
        },
      },
    },
  });
}

async function codecThroughput(args: CompressionRankArgs): Promise<CodecThroughput[]> {
  const out: CodecThroughput[] = [];
  for (const codec of ['lz4', 'zstd'] as const) {
    const config = configFor(codec).collective.tensorCompression as TensorCompressionConfig;
    const c = createCodec(config);
    for (const tensor of ['sparse', 'random'] as const) {
      const bytes = benchTensor(tensor, args.numel).bytes();
      const chunks = Array.from({ length: Math.ceil(bytes.length / CHUNK_BYTES) }, (_, k) =>
        bytes.subarray(k * CHUNK_BYTES, (k + 1) * CHUNK_BYTES),
      );
      let started = performance.now();
      const packed = await Promise.all(chunks.map((chunk) => c.compress(chunk)));
      const compressS = (performance.now() - started) / 1000;
      started = performance.now();
      await Promise.all(packed.map((p) => c.decompress(p, 60_000, 'bench')));
      const decompressS = (performance.now() - started) / 1000;
      out.push({
        codec,
        tensor,
        ratio: bytes.length / packed.reduce((sum, p) => sum + p.length, 0),
        compressGBps: bytes.length / compressS / 1e9,
        decompressGBps: bytes.length / decompressS / 1e9,
      });
    }
  }
  return out;
}

export async function runCompressionBench(
  options: { quick?: boolean; log?: Log } = {},
): Promise<CompressionReport> {
  const log = options.log ?? console.log;
  const args = options.quick ? QUICK : FULL;
  const byCodec = new Map<string, CompressionSample[]>();
  for (const codec of CODECS) {
    const [sender] = await spawnThreads<CompressionSample[]>(
      new URL('./compression-rank.ts', import.meta.url),
      {
        worldSize: 2,
        names: ['sender', 'receiver'],
        args,
        config: configFor(codec),
        timeoutMs: 600_000,
      },
    );
    byCodec.set(codec, sender);
  }
  const raw = byCodec.get('raw')!;
  const rows = CODECS.flatMap((codec) =>
    byCodec.get(codec)!.map((s, i) => ({ ...s, codec, speedup: raw[i].seconds / s.seconds })),
  );
  const codecs = await codecThroughput(args);
  const best = (tensor: string) =>
    Math.max(...rows.filter((r) => r.tensor === tensor && r.codec !== 'raw').map((r) => r.speedup));
  const worst = Math.min(
    ...rows.filter((r) => r.tensor === 'random' && r.codec !== 'raw').map((r) => r.speedup),
  );
  const goals = { sparseSpeedup: best('sparse'), randomSlowdown: 1 / worst - 1 };
  const mib = (args.numel * 2) / MiB;
  log(
    `# compression: bfloat16[${args.numel}] (${mib} MiB), sender -> receiver over an emulated ${LINK_MBPS} Mbit/s link${options.quick ? ' (--quick)' : ''}`,
  );
  log(`# best of ${args.rounds} round(s); each round is one send plus a 1-element acknowledgement`);
  for (const line of formatTable(ROWS, rows)) log(line);
  log(`# codec throughput on the same bytes (one worker, ${CHUNK_BYTES / MiB} MiB chunks, all at once)`);
  for (const line of formatTable(CODEC_ROWS, codecs)) log(line);
  log(`# goal: sparse tensor >= 4x faster than raw: best codec ${fixed(goals.sparseSpeedup, 2)}x`);
  log(
    `# goal: random tensor <= 5% slower than raw: slowest codec ${fixed(goals.randomSlowdown * 100, 1)}% slower`,
  );
  return { rows, codecs, goals };
}

export const main = benchMain('bench/compression.ts', runCompressionBench);

if (isMainModule(import.meta.url)) await main();
