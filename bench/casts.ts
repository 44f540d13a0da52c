/**
 * copy_ between dtypes, the casts of mixed precision, beside TypedArray.set
 * of the destination's bytes in the same run: float32 to and from float16
 * and bfloat16, 1 Mi elements. Where the runtime has a Float16Array (Node 24
 * and later), float16 converts through it a run at a time
 * (tensor/float16-array.ts); before, and for bfloat16, element by element.
 * Run it with each Node to compare (tools/node pins them).
 *
 *   npx tsx bench/casts.ts [--quick] [--json <file>]
 */

import { type DType, Tensor } from '../src/index.ts';
import { RuntimeFloat16Array } from '../src/tensor/float16-array.ts';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { throughput } from './kernels.ts';
import { type Column, fixed, formatTable } from './table.ts';

const ELEMENTS = 1 << 20;

export interface CastRow {
  from: DType;
  to: DType;
  /** Milliseconds per copy_ of ELEMENTS, from the median rate. */
  castMs: number;
  /** The same for TypedArray.set of the destination's bytes. */
  setMs: number;
}

const PAIRS: ReadonlyArray<readonly [DType, DType]> = [
  ['float32', 'float16'],
  ['float16', 'float32'],
  ['float32', 'bfloat16'],
  ['bfloat16', 'float32'],
];

function measure(from: DType, to: DType, samples: number): CastRow {
  const values = Float32Array.from({ length: ELEMENTS }, () => (Math.random() - 0.5) * 1000);
  const src = Tensor.zeros([ELEMENTS], from).copy_(Tensor.fromArray(values));
  const dst = Tensor.zeros([ELEMENTS], to);
  const bytes = dst.nbytes;
  const copyFrom = new Uint8Array(bytes);
  const copyInto = new Uint8Array(bytes);
  // One copy_ per call; the rate is elements per ms, turned back into ms per copy.
  const perMs = (fn: () => void) => 1 / throughput(fn, 1e6, samples);
  return {
    from,
    to,
    castMs: perMs(() => dst.copy_(src)),
    setMs: perMs(() => copyInto.set(copyFrom)),
  };
}

const COLUMNS: readonly Column<CastRow>[] = [
  { title: 'copy_', width: 20, cell: (r) => `${r.from} -> ${r.to}` },
  { title: 'ms', width: 8, cell: (r) => fixed(r.castMs, 2) },
  { title: 'set(ms)', width: 9, cell: (r) => fixed(r.setMs, 3) },
  { title: 'x set', width: 8, cell: (r) => fixed(r.castMs / r.setMs, 1) },
];

export async function runCasts({ quick, log }: { quick: boolean; log: Log }): Promise<CastRow[]> {
  const rows = PAIRS.map(([from, to]) => measure(from, to, quick ? 3 : 7));
  log(
    `# copy_ between dtypes, ${ELEMENTS} elements, beside TypedArray.set of the destination's bytes (same run), ` +
      `Node ${process.version}, runtime Float16Array: ${RuntimeFloat16Array === undefined ? 'no' : 'yes'}`,
  );
  for (const line of formatTable(COLUMNS, rows)) log(line);
  return rows;
}

export const main = benchMain('bench/casts', runCasts);

if (isMainModule(import.meta.url)) await main();
