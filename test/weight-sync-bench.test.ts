/** Smoke test of the weight-sync bench (--quick): it runs, every mode delivers exact weights in threads and in processes, the tables are whole. No timing is asserted. */
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { runWeightSyncBench } from '../bench/weight-sync.ts';
import { NODES_MODES, runWeightSyncNodesBench } from '../bench/weight-sync-nodes.ts';
import { SYNC_MODES } from '../bench/weight-sync-rank.ts';

describe('weight-sync bench', () => {
  it('prints one row per mode beside the naive baseline, all exact, for threads and processes', async () => {
    const lines: string[] = [];
    const report = await runWeightSyncBench({ quick: true, log: (line) => lines.push(line) });
    for (const rows of [report.rows, report.processRows]) {
      expect(rows.map((r) => r.mode)).toEqual(SYNC_MODES);
      for (const row of rows) {
        expect(row.exact).toBe(true);
        expect(row.ms).toBeGreaterThan(0);
        expect(row.gbps).toBeCloseTo(report.bytes / row.ms / 1e6, 9);
      }
      expect(rows[0].speedup).toBe(1);
    }
    const headers = lines.filter((l) => l.startsWith('#') && l.includes('vs-naive'));
    expect(headers).toHaveLength(2);
    for (const header of headers)
      expect(header.slice(1).trim().split(/\s+/)).toEqual(['mode', 'time(ms)', 'GB/s', 'vs-naive', 'exact']);
  }, 120_000);

  it('--nodes: a row per mode (the TCP copy, 1 to 3 rollouts on the other node), all exact, with its goals', async () => {
    const lines: string[] = [];
    const report = await runWeightSyncNodesBench({ quick: true, log: (line) => lines.push(line) });
    expect(report.rows.map((r) => r.mode)).toEqual(NODES_MODES);
    for (const row of report.rows) {
      expect(row.exact, row.mode).toBe(true);
      expect(row.ms).toBeGreaterThan(0);
      expect(row.cpuMs, row.mode).toBeGreaterThan(0);
      expect(row.cpuOverCoresMs).toBeCloseTo(row.cpuMs / availableParallelism(), 9);
    }
    const threeRollouts = report.rows.find((r) => r.mode === 'into R=3')!;
    const oneRollout = report.rows.find((r) => r.mode === 'into R=1')!;
    expect(report.goals.threeCpuOverOne).toBeCloseTo(threeRollouts.cpuOverCoresMs / oneRollout.ms, 9);
    for (const mode of ['into R=1', 'copy_ R=1'])
      expect(report.rows.find((r) => r.mode === mode)!.vsOne).toBe(1);
    expect(report.rows.find((r) => r.mode === 'tcp copy')!.vsTcp).toBe(1);
    expect(lines.at(-1)).toMatch(
      /^# goals \(into\): R=3 \/ R=1 = [\d.]+ \(<= 1.3\), R=3 \/ tcp copy = [\d.]+ \(<= 1.2\)/,
    );
  }, 120_000);
});
