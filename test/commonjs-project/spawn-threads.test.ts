/**
 * A CommonJS program (require() of the package, module.exports of a rank
 * entry) runs thread ranks, in a project whose package.json says "type":
 * "commonjs". Bundled, the entry's require() of the library wrapped it in lazy
 * initialisers that broke its classes ("AbortWord is not a constructor").
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

// This project is CommonJS: TypeScript allows no import.meta here, and vitest gives __dirname.
const here = __dirname;

it('a CommonJS program runs a CommonJS rank entry that requires the library', async () => {
  expect(existsSync(join(here, '../../dist/index.js')), 'run npm run build first').toBe(true);
  const { stdout } = await promisify(execFile)(process.execPath, ['main.cjs'], {
    cwd: here,
    timeout: 60_000,
  });
  expect(JSON.parse(stdout)).toEqual([
    [3, 3],
    [3, 3],
  ]);
});
