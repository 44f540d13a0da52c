/**
 * The tensorcomm command enables Node's compile cache (Node 22.1 and later)
 * before it loads its modules, so a later run loads them without compiling.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import nodeModule from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it, onTestFinished } from 'vitest';
import { nodeScript } from './fixtures/node-script.ts';

const run = promisify(execFile);

/** Files under `path`, at any depth. */
function filesUnder(path: string): string[] {
  return readdirSync(path, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => entry.name);
}

it.runIf(typeof nodeModule.enableCompileCache === 'function')(
  "keeps the command's compiled modules in Node's compile cache, and NODE_DISABLE_COMPILE_CACHE turns it off",
  async () => {
    const cli = await nodeScript('src/cli/tensorcomm.ts');
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-compile-cache-test-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    // Its default place, under the temp directory, which the child's TMPDIR moves; NODE_COMPILE_CACHE
    // would turn the cache on by itself.
    const env = (extra: Record<string, string>) => {
      const { NODE_DISABLE_COMPILE_CACHE: _, NODE_COMPILE_CACHE: __, ...rest } = process.env;
      return { ...rest, TMPDIR: dir, ...extra };
    };
    const off = await run(process.execPath, [...cli, '--help'], {
      env: env({ NODE_DISABLE_COMPILE_CACHE: '1' }),
    });
    expect(off.stdout).toMatch(/^usage: tensorcomm <command>/);
    expect(filesUnder(dir)).toEqual([]);
    const on = await run(process.execPath, [...cli, '--help'], { env: env({}) });
    expect(on.stdout).toMatch(/^usage: tensorcomm <command>/);
    expect(filesUnder(dir).length).toBeGreaterThan(0);
  },
);
