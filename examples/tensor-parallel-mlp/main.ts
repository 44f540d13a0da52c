/**
 * Tensor-parallel MLP: trains a two-layer MLP for a few SGD steps on ranks
 * that each hold a slice of the hidden layer, then checks losses, trained
 * weights and the input gradient against the same model run on one rank in
 * this process. Sizes come from the environment:
 *
 *   WORLD_SIZE=4 BATCH=8 INPUT=16 HIDDEN=32 OUTPUT=8 STEPS=5 LR=0.1 \
 *     node --import tsx examples/tensor-parallel-mlp/main.ts
 *
 * PREDICT=h100-nvlink,a100-nvlink adds a predicted run on each topology. THREADS=1 runs
 * every rank as an async task of one thread (spawnThreads' `threads`), as a prediction of a
 * cluster-sized job needs: WORLD_SIZE=1024 HIDDEN=1024 THREADS=1 PREDICT=h100-ib.
 *
 * HIDDEN need not divide by WORLD_SIZE: shards follow torch.chunk.
 */
import { spawnThreads } from 'tensorcomm';
import { predictedRuns } from '../predicted-runs.ts';
import { initialParams, type Sizes, sgdStep, syntheticBatch } from './mlp.ts';
import type { RankResult, TrainArgs } from './rank.ts';

const env = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!(value > 0)) throw new RangeError(`${name} must be a positive number, got ${process.env[name]}`);
  return value;
};
const worldSize = env('WORLD_SIZE', 4);
const threads = process.env.THREADS === undefined ? undefined : env('THREADS', 1);
const args: TrainArgs = {
  batch: env('BATCH', 8),
  input: env('INPUT', 16),
  hidden: env('HIDDEN', 32),
  output: env('OUTPUT', 8),
  steps: env('STEPS', 5),
  lr: env('LR', 0.1),
};
const TOLERANCE = 1e-4;

const entry = new URL('./rank.ts', import.meta.url);
const results = await spawnThreads<RankResult>(entry, { worldSize, threads, args, timeoutMs: 120_000 });

// The single-rank model: the whole hidden layer, and nothing to reduce.
const reference = initialParams(args);
const batch = syntheticBatch(args);
const referenceLosses: number[] = [];
let referenceDx: Float32Array = new Float32Array(0);
for (let step = 0; step < args.steps; step++) {
  const result = await sgdStep(reference, batch, args, async (partial) => partial);
  referenceLosses.push(result.loss);
  referenceDx = result.dx;
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  if (a.length !== b.length) return Number.POSITIVE_INFINITY;
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / (1 + Math.abs(b[i])));
  return worst;
};
let ok = true;
const check = (what: string, diff: number) => {
  ok &&= diff <= TOLERANCE;
  console.log(`${diff <= TOLERANCE ? 'checked' : 'MISMATCH'}: ${what} (max diff ${diff.toExponential(1)})`);
};

const { batch: n, input, hidden, output }: Sizes = args;
const [first] = results;
console.log(
  `tensor-parallel MLP: ${worldSize} ranks, batch ${n}, ${input} -> ${hidden} -> ${output}, ` +
    `hidden units per rank [${results.map((r) => r.hidden).join(', ')}], ${args.steps} SGD steps (lr ${args.lr})`,
);
first.losses.forEach((loss, step) => {
  console.log(`step ${step + 1}: loss ${loss.toFixed(6)} (single rank ${referenceLosses[step].toFixed(6)})`);
});
check(`losses of ${args.steps} steps against the single-rank run`, maxDiff(first.losses, referenceLosses));
check(
  'losses of every rank against rank 0',
  Math.max(...results.map((r) => maxDiff(r.losses, first.losses))),
);
check(
  `trained W1 [${input},${hidden}], b1 [${hidden}], W2 [${hidden},${output}], b2 [${output}] against the single-rank run`,
  Math.max(...(['w1', 'b1', 'w2', 'b2'] as const).map((k) => maxDiff(first.params[k], reference[k]))),
);
check(
  `input gradient dX [${n},${input}] of the last step against the single-rank run`,
  maxDiff(first.dx, referenceDx),
);
await predictedRuns(entry, { worldSize, threads, args });
console.log(ok ? 'OK' : 'FAILED');
if (!ok) process.exitCode = 1;
