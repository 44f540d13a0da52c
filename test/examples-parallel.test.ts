import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;

/** Runs an example against the built package (dist/: `npm test` builds it first) with small sizes. */
async function example(main: string, env: Record<string, string>): Promise<string> {
  expect(existsSync(`${root}dist/index.js`), 'run npm run build first').toBe(true);
  const { stdout } = await run(process.execPath, ['--import', 'tsx', main], {
    cwd: root,
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return stdout;
}

/** A line per topology PREDICT named, after the checks: the job's predicted time there, with its calls. */
function expectPredictedRuns(out: string, call: string): void {
  for (const topology of ['h100-nvlink', 'a100-nvlink']) {
    const line = out.split('\n').find((l) => l.startsWith(`predicted on ${topology}: `));
    expect(line, `no predicted run on ${topology} in:\n${out}`).toMatch(
      /: \d+\.\d us \(rank \d: compute \d+\.\d us, communication \d+\.\d us of which \d+\.\d exposed/,
    );
    expect(line).toContain(call);
  }
}

describe('parallelism examples', () => {
  it('tensor-parallel MLP matches the single-rank run, with an uneven hidden split', async () => {
    const out = await example('examples/tensor-parallel-mlp/main.ts', {
      WORLD_SIZE: '4',
      BATCH: '4',
      INPUT: '6',
      HIDDEN: '10',
      OUTPUT: '3',
      STEPS: '3',
      PREDICT: 'h100-nvlink,a100-nvlink',
    });
    expect(out).toContain(
      'tensor-parallel MLP: 4 ranks, batch 4, 6 -> 10 -> 3, hidden units per rank [3, 3, 3, 1], 3 SGD steps (lr 0.1)',
    );
    expect(out).toMatch(/^step 3: loss \d\.\d{6} \(single rank \d\.\d{6}\)$/m);
    for (const what of [
      'losses of 3 steps against the single-rank run',
      'losses of every rank against rank 0',
      'trained W1 [6,10], b1 [10], W2 [10,3], b2 [3] against the single-rank run',
      'input gradient dX [4,6] of the last step against the single-rank run',
    ]) {
      expect(out).toContain(`checked: ${what} (max diff`);
    }
    expectPredictedRuns(out, 'allReduce ring/LL');
    expect(out).toMatch(/\nOK\n$/);
  });

  it('tensor-parallel MLP with its ranks as tasks of one thread (THREADS=1) checks and predicts alike', async () => {
    const sizes = { WORLD_SIZE: '8', BATCH: '2', INPUT: '4', HIDDEN: '16', OUTPUT: '2', STEPS: '2' };
    const PREDICT = 'h100-nvlink,a100-nvlink';
    const [threads, tasks] = [
      await example('examples/tensor-parallel-mlp/main.ts', { ...sizes, PREDICT }),
      await example('examples/tensor-parallel-mlp/main.ts', { ...sizes, PREDICT, THREADS: '1' }),
    ];
    expectPredictedRuns(tasks, 'allReduce ring/LL');
    expect(tasks).toMatch(/\nOK\n$/);
    // The same checks and the same predictions, line for line.
    expect(tasks).toBe(threads);
  });

  it('ring attention matches single-rank attention, without and with a causal mask', async () => {
    const out = await example('examples/context-parallel-attention/main.ts', {
      WORLD_SIZE: '4',
      SEQ: '12',
      DIM: '4',
      PREDICT: 'h100-nvlink,a100-nvlink',
    });
    expect(out).toContain('ring attention: 4 ranks, sequence 12 (3 positions per rank), head dim 4');
    expect(out).toContain(
      'checked: full attention, K/V blocks attended per rank [4, 4, 4, 4], output [12,4]',
    );
    expect(out).toContain(
      'checked: causal attention, K/V blocks attended per rank [1, 2, 3, 4], output [12,4]',
    );
    expectPredictedRuns(out, 'send p2p/');
    expect(out).toMatch(/\nOK\n$/);
  });
});
