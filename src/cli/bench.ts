/**
 * `tensorcomm bench`: the collective benchmark table (nccl-tests layout) for
 * a chosen store, world sizes, ops and message sizes, optionally written as
 * JSON and as an SVG chart of busbw against message size.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { busbwChart } from './bench/chart.ts';
import {
  BENCH_STORES,
  type BenchStore,
  COLLECTIVE_OPS,
  type CollectiveOp,
  type Log,
  runCollectivesBench,
} from './bench/collectives.ts';

export const BENCH_USAGE = `usage: tensorcomm bench [options]

Runs collectives between ranks and prints one nccl-tests table per op.

options:
  --store <name>         memory: ranks as threads over MemoryTensorStore (the default);
                         file: ranks as processes over FileTensorStore
  -n, --world-size <n,…> world sizes, e.g. 2,4 (default 2,4)
  --ops <op,…>           ${COLLECTIVE_OPS.join(', ')} (default all)
  -b, --min-bytes <n>    smallest message, with an optional K/M/G suffix (default 4)
  -e, --max-bytes <n>    largest message (default 64M)
  -f, --factor <n>       size multiplication step (default 4)
  --quick                short timing budget per size
  --no-checks            turn off the fingerprint checks and call sites (see docs/guides/debugging.md)
  --json <file>          also write the figures as JSON
  --svg <file>           also write a chart of busbw against message size
  -h, --help             this text`;

export function bytes(text: string, flag: string): number {
  const match = /^(\d+)([KMG]?)$/i.exec(text.trim());
  if (!match) throw new RangeError(`--${flag}: expected a byte count like 4, 64K or 1M, got "${text}"`);
  const scale = { '': 1, K: 1 << 10, M: 1 << 20, G: 1 << 30 }[match[2].toUpperCase() as '' | 'K' | 'M' | 'G'];
  const value = Number(match[1]) * scale;
  if (value < 4) throw new RangeError(`--${flag}: at least 4 bytes (one float32), got ${text}`);
  return value;
}

function list<T extends string>(text: string, allowed: readonly T[], flag: string): T[] {
  const items = text.split(',').map((s) => s.trim());
  for (const item of items) {
    if (!allowed.includes(item as T)) {
      throw new RangeError(`--${flag}: unknown value "${item}" (choose from ${allowed.join(', ')})`);
    }
  }
  return items as T[];
}

export interface BenchCommandOptions {
  store: BenchStore;
  worldSizes: number[];
  ops: CollectiveOp[];
  sizes: number[];
  quick: boolean;
  checks: boolean;
  json?: string;
  svg?: string;
}

/** The command line as options; bad flags and values are errors naming them. */
export function parseBenchCommand(argv: readonly string[]): BenchCommandOptions | 'help' {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      store: { type: 'string', default: 'memory' },
      'world-size': { type: 'string', short: 'n', default: '2,4' },
      ops: { type: 'string', default: COLLECTIVE_OPS.join(',') },
      'min-bytes': { type: 'string', short: 'b', default: '4' },
      'max-bytes': { type: 'string', short: 'e', default: '64M' },
      factor: { type: 'string', short: 'f', default: '4' },
      quick: { type: 'boolean', default: false },
      'no-checks': { type: 'boolean', default: false },
      json: { type: 'string' },
      svg: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return 'help';
  const [store, ...more] = list(values.store, BENCH_STORES, 'store');
  if (more.length > 0) throw new RangeError(`--store: one store, got "${values.store}"`);
  const worldSizes = values['world-size'].split(',').map((s) => Number(s.trim()));
  for (const n of worldSizes) {
    if (!Number.isSafeInteger(n) || n < 2 || n > 512) {
      throw new RangeError(
        `--world-size: each size must be an integer in 2..512, got ${values['world-size']}`,
      );
    }
  }
  const min = bytes(values['min-bytes'], 'min-bytes');
  const max = bytes(values['max-bytes'], 'max-bytes');
  if (max < min) throw new RangeError(`--max-bytes (${max}) is below --min-bytes (${min})`);
  const factor = Number(values.factor);
  if (!Number.isSafeInteger(factor) || factor < 2) {
    throw new RangeError(`--factor: an integer of at least 2, got ${values.factor}`);
  }
  const sizes: number[] = [];
  for (let size = min; size <= max; size *= factor) sizes.push(size);
  return {
    store,
    worldSizes,
    ops: list(values.ops, COLLECTIVE_OPS, 'ops'),
    sizes,
    quick: values.quick,
    checks: !values['no-checks'],
    json: values.json,
    svg: values.svg,
  };
}

export async function benchCommand(argv: string[], log: Log = console.log): Promise<number> {
  let options: BenchCommandOptions | 'help';
  try {
    options = parseBenchCommand(argv);
  } catch (error) {
    console.error(`tensorcomm bench: ${(error as Error).message}\n\n${BENCH_USAGE}`);
    return 2;
  }
  if (options === 'help') {
    log(BENCH_USAGE);
    return 0;
  }
  const report = await runCollectivesBench({
    store: options.store,
    quick: options.quick,
    ops: options.ops,
    worldSizes: options.worldSizes,
    sizes: options.sizes,
    zeroCopy: false,
    debug: options.checks ? undefined : { checks: false, callSites: false },
    log,
  });
  if (options.json) {
    writeFileSync(
      options.json,
      `${JSON.stringify({ store: options.store, checks: options.checks, ...report }, null, 1)}\n`,
    );
    log(`# figures written to ${resolve(options.json)}`);
  }
  if (options.svg) {
    writeFileSync(options.svg, busbwChart(report.rows));
    log(`# chart written to ${resolve(options.svg)}`);
  }
  return 0;
}
