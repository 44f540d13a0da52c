/**
 * Reduction kernel throughput next to memory-copy throughput, per dtype and size.
 *
 *   npx tsx bench/kernels.ts [--quick] [--json <file>]
 *
 * Each kernel row is the in-place two-input reduce of allReduce (out = a,
 * inputs [a, b]); the copy is TypedArray.set of the same number of bytes,
 * measured in the same run so the ratio shows how close the kernel gets to
 * what the memory system allows. The sum is timed twice: on ordinary arrays,
 * and on tensors' own storage (shared memory, whose blocks the kernel copies
 * through libc's memcpy where the library's setup registered it, as here).
 */
import { arrayConstructor, DTYPES, type DType, type TypedArray } from '../src/tensor/dtype.ts';
import { float32ToBfloat16Bits, float32ToFloat16Bits } from '../src/tensor/half.ts';
import '../src/runtime/native-copy.ts';
import { reduceArrays } from '../src/tensor/reduce-kernels.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { isMainModule, type Log, parseBenchArgs, writeJson } from './cli.ts';
import { type Column, fixed, formatTable } from './table.ts';

export interface KernelBenchRow {
  /** Bytes per tensor. */
  readonly bytes: number;
  readonly dtype: DType;
  /** GB/s = tensor bytes / second, 1 GB = 1e9 bytes. */
  readonly copy: number;
  readonly sum: number;
  /** The sum on tensors (their storage is shared memory). */
  readonly tensorSum: number;
  readonly max: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;

const FULL = { sizes: [64 * KiB, MiB, 64 * MiB], samples: 7 };
const QUICK = { sizes: [64 * KiB, MiB], samples: 3 };

/** Calls per sample are doubled until a sample takes this long, so timer resolution does not matter. */
const MIN_SAMPLE_MS = 20;

function randomArray(dtype: DType, length: number, scale: number): TypedArray {
  const out = new (arrayConstructor(dtype))(length);
  for (let i = 0; i < length; i++) {
    const x = (Math.random() * 2 - 1) * scale;
    if (dtype === 'float16') out[i] = float32ToFloat16Bits(x);
    else if (dtype === 'bfloat16') out[i] = float32ToBfloat16Bits(x);
    else if (dtype === 'bool') out[i] = x > 0 ? 1 : 0;
    else if (out instanceof BigInt64Array) out[i] = BigInt(Math.trunc(x * 2 ** 40));
    else out[i] = Math.trunc(x * 2 ** 30); // float arrays keep it, integer stores wrap it
  }
  return out;
}

function elapsedMs(fn: () => void, calls: number): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** Median GB/s (tensor bytes per second) of `samples` timed samples, after warming up. */
export function throughput(fn: () => void, bytes: number, samples: number): number {
  // Calibrating doubles as warm-up: it keeps calling until the loops are optimized and a sample is long enough.
  let calls = 1;
  while (elapsedMs(fn, calls) < MIN_SAMPLE_MS) calls *= 2;
  const rates = Array.from({ length: samples }, () => (bytes * calls) / elapsedMs(fn, calls) / 1e6);
  rates.sort((x, y) => x - y);
  return rates[samples >> 1];
}

function benchOne(dtype: DType, bytes: number, samples: number): KernelBenchRow {
  const length = bytes / arrayConstructor(dtype).BYTES_PER_ELEMENT;
  // a grows by b on every sum call; b small keeps floats finite through all calls.
  const a = randomArray(dtype, length, 100);
  const b = randomArray(dtype, length, 1);
  // Byte views copy exactly the tensor's bytes and type-check for every dtype (BigInt64Array included).
  const copySrc = new Uint8Array(b.buffer);
  const copyDst = new Uint8Array(bytes);
  const [ta, tb] = [a, b].map((x) => {
    const t = Tensor.zeros([length], dtype).data;
    new Uint8Array(t.buffer, t.byteOffset, t.byteLength).set(new Uint8Array(x.buffer));
    return t;
  });
  return {
    bytes,
    dtype,
    copy: throughput(() => copyDst.set(copySrc), bytes, samples),
    sum: throughput(() => reduceArrays('sum', dtype, a, [a, b]), bytes, samples),
    tensorSum: throughput(() => reduceArrays('sum', dtype, ta, [ta, tb]), bytes, samples),
    max: throughput(() => reduceArrays('max', dtype, a, [a, b]), bytes, samples),
  };
}

const COLUMNS: readonly Column<KernelBenchRow>[] = [
  { title: 'size(B)', width: 11, cell: (row) => String(row.bytes) },
  { title: 'dtype', width: 10, cell: (row) => row.dtype },
  {
    title: 'count',
    width: 10,
    cell: (row) => String(row.bytes / arrayConstructor(row.dtype).BYTES_PER_ELEMENT),
  },
  { title: 'copy GB/s', width: 11, cell: (row) => fixed(row.copy) },
  { title: 'sum GB/s', width: 10, cell: (row) => fixed(row.sum) },
  { title: 'sum/copy', width: 10, cell: (row) => fixed(row.sum / row.copy) },
  { title: 'tensors/copy', width: 14, cell: (row) => fixed(row.tensorSum / row.copy) },
  { title: 'max GB/s', width: 10, cell: (row) => fixed(row.max) },
  { title: 'max/copy', width: 10, cell: (row) => fixed(row.max / row.copy) },
];

/**
 * Runs the benchmark, printing each row as it completes (the full run takes minutes) and returning the
 * rows; `--quick` is the short smoke-test run. `--json` is written only when run directly.
 */
export function main(
  argv: readonly string[] = process.argv.slice(2),
  log: Log = console.log,
): KernelBenchRow[] {
  const { sizes, samples } = parseBenchArgs(argv, 'bench/kernels').quick ? QUICK : FULL;
  log('# reduceArrays kernels: in-place two-input reduce (out = a, inputs [a, b]) vs TypedArray.set copy');
  log(
    `# GB/s = tensor bytes / second for kernels and copy alike (1 GB = 1e9 B); median of ${samples} samples`,
  );
  log(`# node ${process.version} (int64 speed depends on V8's BigInt64 lowering), ${process.arch}`);
  log(formatTable(COLUMNS, [])[0]);
  const rows: KernelBenchRow[] = [];
  for (const bytes of sizes) {
    for (const dtype of DTYPES) {
      const row = benchOne(dtype, bytes, samples);
      rows.push(row);
      log(formatTable(COLUMNS, [row])[1]);
    }
  }
  const goal = rows.find((row) => row.bytes === 64 * MiB && row.dtype === 'float32');
  if (goal !== undefined) {
    const ratio = goal.sum / goal.copy;
    log('#');
    log(
      `# float32 sum at 64 MiB: ${ratio.toFixed(2)}x copy bandwidth (goal >= 0.50x: ${ratio >= 0.5 ? 'met' : 'missed'}), ` +
        `${(goal.tensorSum / goal.copy).toFixed(2)}x on tensors`,
    );
  }
  return rows;
}

if (isMainModule(import.meta.url)) {
  const rows = main();
  const { json } = parseBenchArgs(process.argv.slice(2), 'bench/kernels');
  if (json !== undefined) await writeJson(json, rows, console.log);
}
