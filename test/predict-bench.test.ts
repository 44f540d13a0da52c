/** Smoke test of the prediction bench (--quick): the calibration, every measured-vs-predicted row, the summaries and the cost table print. No timing is asserted. */
import { describe, expect, it } from 'vitest';
import { main } from '../bench/predict.ts';

describe('predict bench', () => {
  it('prints the fits, a row per backend, op and size, the error summary and the cost of predict mode', async () => {
    const lines: string[] = [];
    const { accuracy, cost } = await main(['--quick'], (line) => lines.push(line));
    expect(accuracy.links.map((l) => [l.link, l.backend])).toEqual([
      ['intraNode', 'processes'],
      ['interNode', 'nodes'],
    ]);
    expect(accuracy.rows.map((r) => `${r.backend} ${r.op}`)).toEqual(
      ['processes', 'nodes'].flatMap((b) =>
        ['allReduce', 'allGather', 'reduceScatter', 'broadcast', 'sendRecv'].map((op) => `${b} ${op}`),
      ),
    );
    for (const row of accuracy.rows) {
      expect(row.bytes).toBe(1 << 20);
      expect(row.measuredUs).toBeGreaterThan(0);
      expect(row.predictedUs).toBeGreaterThan(0);
      expect(row.error).toBeCloseTo(row.predictedUs / row.measuredUs - 1, 9);
    }
    const header = lines.findIndex((l) =>
      /^#\s+ranks\s+op\s+size\(B\)\s+measured\(us\)\s+predicted\(us\)\s+error$/.test(l),
    );
    expect(lines.slice(header + 1, header + 11).every((l) => / 1048576 .*[+-]\d+\.\d%$/.test(l))).toBe(true);
    expect(lines).toContain(
      `# all: 10 calls from 1 MiB, |error| median ${(accuracy.judged.median * 100).toFixed(1)}%, p95 ${(accuracy.judged.p95 * 100).toFixed(1)}%`,
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^# goal: median \|error\| <= 20% from 1 MiB: .* not judged with --quick$/),
    );
    expect(cost.rows.map((r) => r.backend)).toEqual(['threads', 'processes']);
    for (const row of cost.rows) {
      for (const ms of [row.plainColdMs, row.predictColdMs, row.plainWarmMs, row.predictWarmMs])
        expect(ms).toBeGreaterThan(0);
      // One pair with --quick: the median of its ratio is its ratio.
      expect(row.coldOverhead).toBeCloseTo(row.predictColdMs / row.plainColdMs - 1, 9);
      expect(row.warmOverhead).toBeCloseTo(row.predictWarmMs / row.plainWarmMs - 1, 9);
    }
    expect(lines.at(-1)).toMatch(
      /^# goal: predict mode adds <= 10% to the job's wall time \(cold\): .* not judged with --quick$/,
    );
  }, 120_000);
});
