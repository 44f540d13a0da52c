/**
 * Context-parallel (ring) attention: the sequence is split across ranks, each
 * keeps its queries and the K/V blocks go around the ring; the result is
 * checked against single-rank attention computed in this process, without and
 * with a causal mask. Sizes come from the environment:
 *
 *   WORLD_SIZE=4 SEQ=64 DIM=16 node --import tsx examples/context-parallel-attention/main.ts
 *
 * PREDICT=h100-nvlink,a100-nvlink adds a predicted run on each topology.
 */
import { spawnThreads } from 'tensorcomm';
import { predictedRuns } from '../predicted-runs.ts';
import { qkv, referenceAttention } from './attention.ts';
import type { AttentionArgs, RingResult } from './rank.ts';

const env = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${process.env[name]}`);
  }
  return value;
};
const worldSize = env('WORLD_SIZE', 4);
const seq = env('SEQ', 64);
const dim = env('DIM', 16);
if (seq % worldSize !== 0)
  throw new RangeError(`SEQ (${seq}) must be a multiple of WORLD_SIZE (${worldSize})`);
const TOLERANCE = 1e-5;

console.log(
  `ring attention: ${worldSize} ranks, sequence ${seq} (${seq / worldSize} positions per rank), head dim ${dim}`,
);
const entry = new URL('./rank.ts', import.meta.url);
const args: AttentionArgs = { seq, dim };
const results = await spawnThreads<Record<'full' | 'causal', RingResult>>(entry, {
  worldSize,
  args,
  timeoutMs: 120_000,
});
const { q, k, v } = qkv(seq, dim);
let ok = true;
for (const mode of ['full', 'causal'] as const) {
  const expected = referenceAttention(q, k, v, seq, dim, mode === 'causal');
  let diff = 0;
  for (const r of results) {
    for (let i = 0; i < expected.length; i++)
      diff = Math.max(diff, Math.abs(r[mode].output[i] - expected[i]));
  }
  const match = diff <= TOLERANCE;
  ok &&= match;
  console.log(
    `${match ? 'checked' : 'MISMATCH'}: ${mode} attention, K/V blocks attended per rank ` +
      `[${results.map((r) => r[mode].blocks).join(', ')}], output [${seq},${dim}] of every rank against ` +
      `single-rank softmax attention (max diff ${diff.toExponential(1)})`,
  );
}
await predictedRuns(entry, { worldSize, args });
console.log(ok ? 'OK' : 'FAILED');
if (!ok) process.exitCode = 1;
