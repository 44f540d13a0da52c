import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { benchCommand, parseBenchCommand } from '../src/cli/bench.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('tensorcomm bench', () => {
  it('prints nccl-tests tables and writes the figures as JSON and an SVG chart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-bench-'));
    dirs.push(dir);
    const [json, svg] = [join(dir, 'figures.json'), join(dir, 'busbw.svg')];
    const lines: string[] = [];
    const argv = ['-n', '2', '--ops', 'allReduce,broadcast', '-b', '4', '-e', '1K', '-f', '16', '--quick'];
    expect(await benchCommand([...argv, '--json', json, '--svg', svg], (l) => lines.push(l))).toBe(0);

    const figures = JSON.parse(readFileSync(json, 'utf8'));
    expect(figures).toMatchObject({ store: 'memory', checks: true });
    expect(figures.rows.map((r: { op: string; bytes: number }) => [r.op, r.bytes])).toEqual([
      ['allReduce', 4],
      ['allReduce', 64],
      ['allReduce', 1024],
      ['broadcast', 4],
      ['broadcast', 64],
      ['broadcast', 1024],
    ]);
    for (const row of figures.rows) {
      expect(row.timeUs).toBeGreaterThan(0);
      expect(row.busbw).toBeGreaterThan(0);
    }
    expect(lines.some((l) => l.startsWith('#') && l.includes('busbw(GB/s)'))).toBe(true);

    const chart = readFileSync(svg, 'utf8');
    expect(chart).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    const series = [...chart.matchAll(/<polyline class="series" data-name="([^"]+)"[^>]* points="([^"]+)"/g)];
    expect(series.map((m) => m[1])).toEqual(['allReduce, 2 ranks', 'broadcast, 2 ranks']);
    for (const m of series) expect(m[2].split(' ')).toHaveLength(3);
    expect(chart).toContain('busbw (GB/s)');
  });

  it('--store file runs the ranks as processes over the file store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-bench-'));
    dirs.push(dir);
    const json = join(dir, 'figures.json');
    const lines: string[] = [];
    const argv = ['--store', 'file', '-n', '2', '--ops', 'allReduce,sendRecv', '-b', '4', '-e', '64K'];
    expect(await benchCommand([...argv, '-f', '128', '--quick', '--json', json], (l) => lines.push(l))).toBe(
      0,
    );
    expect(lines).toContain('# 2 ranks as processes over FileTensorStore');
    const figures = JSON.parse(readFileSync(json, 'utf8'));
    expect(figures.store).toBe('file');
    expect(figures.rows.map((r: { op: string; bytes: number }) => [r.op, r.bytes])).toEqual([
      ['allReduce', 4],
      ['allReduce', 512],
      ['allReduce', 65536],
      ['sendRecv', 4],
      ['sendRecv', 512],
      ['sendRecv', 65536],
    ]);
    for (const row of figures.rows) expect(row.timeUs).toBeGreaterThan(0);
  });

  it('bad flags are usage errors naming them', async () => {
    expect(() => parseBenchCommand(['--store', 'nccl'])).toThrow(/--store: unknown value "nccl"/);
    expect(() => parseBenchCommand(['--store', 'memory,file'])).toThrow(/--store: one store/);
    expect(() => parseBenchCommand(['--ops', 'allreduce'])).toThrow(/--ops: unknown value "allreduce"/);
    expect(() => parseBenchCommand(['-n', '1'])).toThrow(
      /--world-size: each size must be an integer in 2\.\.512/,
    );
    expect(() => parseBenchCommand(['-b', '2'])).toThrow(/--min-bytes: at least 4 bytes/);
    expect(() => parseBenchCommand(['-b', '1M', '-e', '1K'])).toThrow(/--max-bytes .* is below --min-bytes/);
    expect(parseBenchCommand(['-b', '1K', '-e', '16K'])).toMatchObject({ sizes: [1024, 4096, 16384] });
    expect(await benchCommand(['--bogus'], () => {})).toBe(2);
  });
});
