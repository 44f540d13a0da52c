/**
 * The parallelism examples' predicted runs: with PREDICT naming topologies
 * (e.g. PREDICT=h100-nvlink,a100-nvlink), the example's ranks run again in
 * predict mode on each, and one line says what a step of the job would take
 * there. Ranks declare their compute with ctx.predict?.compute(us).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type PredictReport, spawnThreads } from 'tensorcomm';

/**
 * Floating-point operations an H100 does in a microsecond, at half its dense
 * bf16 peak (~990 TFLOP/s): what the examples' ranks charge their matmuls at.
 */
export const GPU_FLOPS_PER_US = 0.5 * 990e6;

export async function predictedRuns(
  entry: URL,
  options: { worldSize: number; threads?: number; args: unknown },
): Promise<void> {
  const topologies = (process.env.PREDICT ?? '').split(',').filter((name) => name !== '');
  for (const topology of topologies) {
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-example-predict-'));
    try {
      const report = join(dir, 'predict.json');
      await spawnThreads(entry, { ...options, timeoutMs: 120_000, predict: { topology, report } });
      const { ranks, calls } = JSON.parse(readFileSync(report, 'utf8')) as PredictReport;
      const slowest = ranks.reduce((a, b) => (b.endUs > a.endUs ? b : a));
      const algorithms = [...new Set(calls.map((c) => `${c.op} ${c.algorithm}/${c.protocol}`))].sort();
      console.log(
        `predicted on ${topology}: ${slowest.endUs.toFixed(1)} us (rank ${slowest.rank}: compute ` +
          `${slowest.computeUs.toFixed(1)} us, communication ${slowest.commUs.toFixed(1)} us of which ` +
          `${slowest.exposedCommUs.toFixed(1)} exposed, ${slowest.waitUs.toFixed(1)} waiting); ` +
          `${calls.length} calls: ${algorithms.join(', ')}`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
