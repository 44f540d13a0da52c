/** Smoke test of the compression bench: every codec and tensor row with positive figures; no timing is asserted. */
import { describe, expect, it } from 'vitest';
import { main } from '../bench/compression.ts';

describe('compression bench', () => {
  it('prints raw, lz4 and zstd rows, codec throughput and both goals (--quick)', async () => {
    const lines: string[] = [];
    const report = await main(['--quick'], (line) => lines.push(line));
    expect(report.rows.map((r) => `${r.codec}/${r.tensor}`)).toEqual([
      'raw/sparse',
      'raw/random',
      'lz4/sparse',
      'lz4/random',
      'zstd/sparse',
      'zstd/random',
    ]);
    for (const r of report.rows) expect(r.seconds).toBeGreaterThan(0);
    const sparse = report.rows.filter((r) => r.tensor === 'sparse');
    // Compression shrinks what the emulated link carries for the sparse tensor.
    expect(sparse[1].wireBytes).toBeLessThan(sparse[0].wireBytes / 2);
    expect(sparse[2].wireBytes).toBeLessThan(sparse[0].wireBytes / 2);
    expect(report.codecs).toHaveLength(4);
    for (const c of report.codecs) expect(c.compressGBps).toBeGreaterThan(0);
    expect(lines.filter((l) => l.startsWith('# goal:'))).toHaveLength(2);
  }, 120_000);
});
