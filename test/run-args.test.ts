/**
 * `tensorcomm run --args '<json>'` hands a script's default-export
 * main(ctx, args) its args, as launchProcesses' `args` option does; process
 * ranks' results come back with their Tensors as Tensors.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { runCommand } from '../src/cli/run-command.ts';
import { launchProcesses, Tensor } from '../src/index.ts';
import { nodeScript } from './fixtures/node-script.ts';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const entry = 'test/fixtures/args-rank.ts';

describe('tensorcomm run --args', { timeout: 120_000 }, () => {
  it('gives a default-export main its args, parsed from JSON, on every rank', async () => {
    const cli = [...(await nodeScript('src/cli/tensorcomm.ts')), 'run'];
    const args = '{"steps":3,"tags":["a"]}';
    const { stdout } = await run(process.execPath, [...cli, '--nproc', '2', '--args', args, entry], {
      cwd: root,
      timeout: 60_000,
    });
    for (const rank of [0, 1]) expect(stdout).toContain(`[rank ${rank}] rank ${rank} args ${args}`);
  });

  it.each([
    ['{steps: 3}', /^tensorcomm run: --args must be JSON, e\.g\. '\{"steps":10\}': /],
    ['', /^tensorcomm run: --args must be JSON/],
  ])('refuses --args %j, not JSON, with exit code 2 and the usage', async (text, message) => {
    const printed = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await runCommand(['--nproc', '2', '--args', text, entry])).toBe(2);
      expect(printed.mock.calls[0][0]).toMatch(message);
      expect(printed.mock.calls[0][0]).toContain('--args JSON');
    } finally {
      printed.mockRestore();
    }
  });
});

it('launchProcesses resolves to what the ranks returned, Tensors as Tensors', {
  timeout: 120_000,
}, async () => {
  const results = await launchProcesses<{ rank: number; sum: Tensor }>(
    new URL(`../${entry}`, import.meta.url),
    { nproc: 2, args: { steps: 1 }, output: () => {} },
  );
  expect(results.map((r) => r.rank)).toEqual([0, 1]);
  for (const { sum } of results) {
    expect(sum).toBeInstanceOf(Tensor);
    expect(sum.toArray()).toEqual([3, 3]);
  }
});
