import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;

describe('examples', () => {
  it('the demo (npm start) runs its ranks against the built package', async () => {
    // Examples import the package by name, i.e. dist/: `npm test` builds it first.
    expect(existsSync(`${root}dist/index.js`), 'run npm run build first').toBe(true);
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/demo.ts'], {
      cwd: root,
      env: { ...process.env, WORLD_SIZE: '3' },
      timeout: 60_000,
    });
    expect(stdout).toContain(
      'rank-0: allReduce sum = 6 (expected 6), peers = [rank-0, rank-1, rank-2], max even rank = 2, ring received 2',
    );
    expect(stdout).toContain(
      'rank-1: allReduce sum = 6 (expected 6), peers = [rank-0, rank-1, rank-2], ring received 0',
    );
    expect(stdout).toMatch(/3 ranks finished in \d+ ms/);
  });

  it('the data-parallel example runs as processes through the built tensorcomm command', async () => {
    const { stdout } = await run(
      process.execPath,
      ['dist/cli/tensorcomm.js', 'run', '--nproc', '2', 'examples/processes/data-parallel.ts', '300'],
      { cwd: root, timeout: 60_000 },
    );
    for (const r of [0, 1]) {
      expect(stdout).toMatch(
        new RegExp(
          `\\[rank ${r}\\] rank-${r} \\(pid \\d+\\): weight=3\\.000 bias=-1\\.000 after 300 steps; ranks agree: true`,
        ),
      );
    }
  });
});
