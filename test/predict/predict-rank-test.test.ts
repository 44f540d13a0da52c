/** Predict mode where users meet it: inside a rankTest, and through `tensorcomm run --predict`. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { runCommand } from '../../src/cli/run-command.ts';
import {
  loadTopology,
  type PredictReport,
  predictCollective,
  spawnThreads,
  Tensor,
} from '../../src/index.ts';
import { rankTest } from '../../src/testing/index.ts';
import { freePort } from '../fixtures/free-port.ts';

rankTest(
  'a rank test predicts: ctx.predict moves with compute and awaited calls',
  { worldSize: 2, predict: { topology: 'h200-nvlink' } },
  async (ctx) => {
    const clock = ctx.predict;
    if (clock === undefined) throw new Error('ctx.predict is undefined in a predicting rank test');
    clock.compute(10 * (ctx.rank + 1));
    const t = Tensor.full([256], ctx.rank + 1, 'float32');
    await ctx.world.allReduce(t);
    expect(t.toArray()[0]).toBe(3);
    const us = predictCollective({
      op: 'allReduce',
      bytes: 1024,
      ranks: 2,
      topology: loadTopology('h200-nvlink'),
    }).us;
    expect(clock.now()).toBeCloseTo(20 + us, 6);
    expect(() => clock.compute(-1)).toThrow(/ctx.predict.compute: us must be a finite number ≥ 0, got -1/);
  },
);

describe('tensorcomm run --predict', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-run-predict-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('runs the script as usual, writes the report and prints its table', async () => {
    const report = join(dir, 'run.json');
    const printed: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((line: string) => void printed.push(line));
    try {
      const code = await runCommand([
        '--nproc',
        '2',
        '--predict',
        'h100-ib',
        '--predict-report',
        report,
        'test/fixtures/process-script.ts',
        'word',
      ]);
      expect(code).toBe(0);
    } finally {
      log.mockRestore();
    }
    const written = JSON.parse(readFileSync(report, 'utf8')) as PredictReport;
    expect(written.topology).toBe('h100-ib');
    expect(written.calls.map((c) => [c.rank, c.op])).toEqual([
      [0, 'allReduce'],
      [1, 'allReduce'],
      [0, 'barrier'],
      [1, 'barrier'],
    ]);
    expect(printed.some((line) => /allReduce/.test(line))).toBe(true);
    expect(printed.some((line) => /predicted end/.test(line))).toBe(true);
  });

  it('a job of two nodes predicts the same report as threads: the stamps of its messages cross the network', async () => {
    const entry = 'test/fixtures/predict-messages.ts';
    const threads = join(dir, 'threads.json');
    await spawnThreads(new URL(`../../${entry}`, import.meta.url), {
      worldSize: 2,
      predict: { topology: 'h100-ib', report: threads },
    });
    const nodes = join(dir, 'nodes.json');
    const port = String(await freePort());
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const launcher = (node: number) =>
        runCommand([
          ...['--nnodes', '2', '--node-rank', `${node}`, '--nproc', '1'],
          ...['--master-addr', '127.0.0.1', '--master-port', port],
          ...['--predict', 'h100-ib', '--predict-report', nodes],
          entry,
        ]);
      expect(await Promise.all([launcher(0), launcher(1)])).toEqual([0, 0]);
    } finally {
      log.mockRestore();
    }
    const report = JSON.parse(readFileSync(nodes, 'utf8')) as PredictReport;
    // 3 steps: an allReduce and a message each way per rank, then 70 messages from rank 0 to rank 1.
    expect(report.calls.filter((c) => c.op === 'recv')).toHaveLength(3 * 2 + 3 * 70);
    expect(report).toEqual(JSON.parse(readFileSync(threads, 'utf8')));
  });

  it('--predict-report without --predict is a usage error', async () => {
    const printed = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(
        await runCommand(['--nproc', '1', '--predict-report', 'x.json', 'test/fixtures/process-script.ts']),
      ).toBe(2);
      expect(printed.mock.calls[0][0]).toContain('--predict-report needs --predict TOPOLOGY');
    } finally {
      printed.mockRestore();
    }
  });
});
