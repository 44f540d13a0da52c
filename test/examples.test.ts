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
});
