/**
 * Rank threads load a job's modules from one esbuild bundle (src/launch/rank-bundle.ts):
 * a TypeScript entry with relative imports runs without a loader in the thread,
 * sees the rank's own library instance, its own import.meta.url and source
 * lines; an edited entry is rebuilt, an unchanged one is not; two jobs share
 * no module state; an entry that cannot be bundled fails in its ranks as before;
 * the threads load the thread side of the library only, its chunks without
 * source maps, every chunk in ASCII.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { cacheCommand } from '../src/cli/cache.ts';
import { JobFailedError, spawnThreads } from '../src/index.ts';
import { MAX_BUNDLES, pruneBundles } from '../src/launch/cached-bundles.ts';
import { rankBundle, scriptBundle } from '../src/launch/rank-bundle.ts';
import { rankSetupUrl } from '../src/launch/rank-setup.ts';
import { rankWorkerUrl } from '../src/launch/spawn-threads.ts';
import { BUNDLE_CACHE_DIR } from '../src/runtime/bundle-cache.ts';
import type { BundledRank } from './fixtures/bundled-entry.ts';
import { entryBundle, rootImporter } from './fixtures/root-importer.ts';

const entry = new URL('./fixtures/bundled-entry.ts', import.meta.url);
const helper = new URL('./fixtures/bundled-helper.ts', import.meta.url);
const scratch = mkdtempSync(join(tmpdir(), 'tensorcomm-bundle-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The code files of a bundle: its modules, the script chunks that stand behind some, the CommonJS twins of others. */
const isCode = (name: string) =>
  name.endsWith('.mjs') || name.endsWith('.script.js') || name.endsWith('.cjs');

/** Every code file of the bundle whose module is at `url`, as one text. */
function bundleText(url: URL | string): string {
  const dir = dirname(fileURLToPath(url));
  return readdirSync(dir)
    .filter(isCode)
    .map((name) => readFileSync(join(dir, name), 'utf8'))
    .join('\n');
}

// How esbuild writes a class declaration.
const PROCESS_ONLY = ['FileTensorStore = class', 'NetworkTensorStore = class', 'RendezvousServer = class'];

function lineOf(url: URL, text: string): number {
  return (
    readFileSync(url, 'utf8')
      .split('\n')
      .findIndex((line) => line.includes(text)) + 1
  );
}

describe('bundled rank threads', () => {
  it('a TypeScript entry with relative imports shares the rank’s library and keeps its own URLs and lines', async () => {
    const ranks = await spawnThreads<BundledRank>(entry, { worldSize: 3, args: {} });
    for (const rank of ranks) {
      expect(rank.sameLibrary).toBe(true);
      expect(rank.entryUrl).toBe(entry.href);
      expect(rank.helper).toEqual({ url: helper.href, line: lineOf(helper, 'new Error().stack') });
    }
  });

  it('two jobs share no module state', async () => {
    const first = await spawnThreads<BundledRank>(entry, { worldSize: 2, args: {} });
    const second = await spawnThreads<BundledRank>(entry, { worldSize: 2, args: {} });
    expect([...first, ...second].map((rank) => rank.calls)).toEqual([1, 1, 1, 1]);
  });

  it('a rank’s error names the entry’s source line', async () => {
    const error = await spawnThreads(entry, { worldSize: 2, args: { fail: true } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures } = error as JobFailedError;
    expect(failures[0].error.message).toMatch(/rank \d fails on purpose/);
    expect(failures[0].error.stack).toContain(`bundled-entry.ts:${lineOf(entry, 'fails on purpose')}:`);
  });

  it('an edited entry is rebuilt, an unchanged one comes from the cache', async () => {
    const file = join(scratch, 'edited.mjs');
    const write = (value: number) =>
      writeFileSync(file, `export default async function main() { return ${value}; }\n`);
    write(1);
    const modules = [rankWorkerUrl().href, rankSetupUrl(), pathToFileURL(file).href] as const;
    const built = await rankBundle(...modules);
    expect(built).toBeDefined();
    const again = await rankBundle(...modules);
    expect(again?.entryUrl).toBe(built?.entryUrl);
    expect(statSync(new URL(again!.entryUrl)).mtimeMs).toBe(statSync(new URL(built!.entryUrl)).mtimeMs);
    expect(await spawnThreads(file, { worldSize: 2 })).toEqual([1, 1]);
    // A bundle no manifest names: dropped by the next build once it is an hour old, kept while younger.
    const [stale, young] = ['a', 'c'].map((digit) =>
      join(BUNDLE_CACHE_DIR, `${digit.repeat(20)}-${'b'.repeat(20)}`),
    );
    for (const dir of [stale, young]) mkdirSync(dir, { recursive: true });
    utimesSync(stale, new Date(Date.now() - 7_200_000), new Date(Date.now() - 7_200_000));
    write(22);
    expect((await rankBundle(...modules))?.entryUrl).not.toBe(built?.entryUrl);
    expect([existsSync(stale), existsSync(young)]).toEqual([false, true]);
    rmSync(young, { recursive: true });
    expect(await spawnThreads(file, { worldSize: 2 })).toEqual([22, 22]);
  });

  it('rank threads load the thread side of the library only; a script bundle keeps the process side', async () => {
    const file = rootImporter(
      scratch,
      'root-import.mjs',
      'export default async function main(ctx) { const t = Tensor.full([2], ctx.rank + 1); await ctx.world.allReduce(t); return t.toArray(); }',
    );
    const built = await entryBundle(file);
    const threads = bundleText(built!.setupUrl);
    for (const code of PROCESS_ONLY) expect(threads).not.toContain(code);
    expect(threads).toContain('MemoryTensorStore = class');
    expect(await spawnThreads(file, { worldSize: 2 })).toEqual([
      [3, 3],
      [3, 3],
    ]);
    const script = bundleText((await scriptBundle(pathToFileURL(file).href))!);
    for (const code of PROCESS_ONLY) expect(script).toContain(code);
  });

  it('an entry that imports the package root holds none of the library’s modules, and none it does not use is loaded', async () => {
    const file = rootImporter(
      scratch,
      'root-unused.mjs',
      'export default async function main(ctx) { return [typeof ctx.collective.createCollectiveGroup, Tensor.ones([1]).toArray()]; }',
    );
    const built = await entryBundle(file);
    // esbuild heads each module's code in a chunk with its path.
    const modules = (text: string) => text.match(/^\/\/ (src|dist)\/.*$/gm) ?? [];
    expect(modules(readFileSync(fileURLToPath(built!.entryUrl), 'utf8'))).toEqual([]);
    expect(bundleText(built!.setupUrl)).not.toContain('HEADER_LIMITS = {');
    expect(await spawnThreads(file, { worldSize: 2 })).toEqual([
      ['function', [1]],
      ['function', [1]],
    ]);
  });

  it('the library’s own chunks carry no source map, the entry’s (and its twin’s) does, and every chunk is ASCII', async () => {
    const file = rootImporter(
      scratch,
      'non-ascii.mjs',
      // A regular expression literal keeps its characters through esbuild: its escapes must mean the same.
      "// rank → sum, ≤ 2 ranks 🙂\nexport default async function main() { return [Tensor.full([1], 1).toArray(), 'π≈3', /^≥ 🙂$/u.test('≥ 🙂'), /≤/.test('<')]; }",
    );
    const built = await entryBundle(file);
    const dir = dirname(fileURLToPath(built!.setupUrl));
    const chunks = readdirSync(dir).filter(isCode);
    const mapped = chunks.filter((name) =>
      readFileSync(join(dir, name), 'utf8').includes('//# sourceMappingURL='),
    );
    // The entry and its CommonJS twin, which keeps its lines, share its map.
    expect(mapped.sort()).toEqual(['entry.cjs', 'entry.mjs']);
    expect(readdirSync(dir).filter((name) => name.endsWith('.map'))).toEqual(['entry.mjs.map']);
    for (const name of chunks) expect(readFileSync(join(dir, name), 'utf8')).toMatch(/^[\0-\x7f]*$/);
    expect(await spawnThreads(file, { worldSize: 2 })).toEqual([
      [[1], 'π≈3', true, false],
      [[1], 'π≈3', true, false],
    ]);
  });

  it('an entry that cannot be bundled fails in its ranks with its own error', async () => {
    const file = join(scratch, 'broken.mjs');
    writeFileSync(file, 'export default async function main( {\n');
    expect(await entryBundle(file)).toBeUndefined();
    const error = await spawnThreads(file, { worldSize: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    expect((error as JobFailedError).message).toMatch(/rank 0 \(rank-0\): SyntaxError/);
  });

  it('a script left unbundled says why under NODE_DEBUG=tensorcomm, and only there', async () => {
    const file = join(scratch, 'unbundled.mjs');
    writeFileSync(file, 'export default async function main( {\n');
    const script =
      `import { scriptBundle } from ${JSON.stringify(new URL('../src/launch/rank-bundle.ts', import.meta.url).href)};\n` +
      `console.log(await scriptBundle(${JSON.stringify(pathToFileURL(file).href)}));`;
    const run = (debug: string) =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        env: { ...process.env, NODE_DEBUG: debug },
      });
    const [on, off] = await Promise.all([run('tensorcomm'), run('')]);
    expect([on.stdout, off.stdout]).toEqual(['undefined\n', 'undefined\n']);
    expect(on.stderr).toMatch(
      /TENSORCOMM \d+: the script file:\S+\/unbundled\.mjs: loaded unbundled \(a slower start\): .*Build failed/,
    );
    expect(off.stderr).not.toMatch(/unbundled/);
  });

  it('a project switched between "commonjs" and "module" gets a bundle built anew', async () => {
    const project = join(scratch, 'switched');
    mkdirSync(project, { recursive: true });
    const manifest = join(project, 'package.json');
    writeFileSync(manifest, JSON.stringify({ type: 'commonjs' }));
    const file = join(project, 'main.mjs');
    writeFileSync(file, 'export default async function main() { return 1; }\n');
    const modules = [rankWorkerUrl().href, rankSetupUrl(), pathToFileURL(file).href] as const;
    const first = await rankBundle(...modules);
    expect((await rankBundle(...modules))?.entryUrl).toBe(first?.entryUrl);
    writeFileSync(manifest, JSON.stringify({ type: 'module' }));
    // A second apart at least, whatever the file system's clock: the stamp reads size and mtime.
    utimesSync(manifest, new Date(Date.now() + 2_000), new Date(Date.now() + 2_000));
    expect((await rankBundle(...modules))?.entryUrl).not.toBe(first?.entryUrl);
  });
});

describe('the bundle cache stays bounded', () => {
  const HOUR = 3_600_000;
  const hex = (n: number) => n.toString(16).padStart(20, '0');

  /** A cache of `count` current bundles (manifest and inputs there), bundle i last used `ageMs(i)` ago. */
  function cacheOf(count: number, ageMs: (i: number) => number): { dir: string; bundles: string[] } {
    const dir = mkdtempSync(join(scratch, 'cache-'));
    const input = join(dir, 'input.ts');
    writeFileSync(input, '');
    const bundles: string[] = [];
    for (let i = 0; i < count; i++) {
      const [key, stamp] = [hex(i), hex(i + 1_000)];
      const bundle = join(dir, `${key}-${stamp}`);
      mkdirSync(bundle);
      writeFileSync(join(dir, `${key}.json`), JSON.stringify({ inputs: [input], stamp }));
      const at = new Date(Date.now() - ageMs(i));
      utimesSync(bundle, at, at);
      bundles.push(bundle);
    }
    return { dir, bundles };
  }

  it('keeps the most recently used bundles up to its bound, and every one used within the hour', () => {
    // Bundle i was used i hours ago, the first three within the hour.
    const { dir, bundles } = cacheOf(MAX_BUNDLES + 10, (i) => (i < 3 ? i * 1_000 : i * HOUR));
    pruneBundles(dir);
    const kept = bundles.filter((b) => existsSync(b));
    expect(kept).toEqual(bundles.slice(0, MAX_BUNDLES));
    expect(readdirSync(dir).filter((name) => name.endsWith('.json'))).toHaveLength(MAX_BUNDLES);
    // Over the bound but all in use: none is dropped.
    const busy = cacheOf(MAX_BUNDLES + 2, (i) => i * 1_000);
    pruneBundles(busy.dir);
    expect(busy.bundles.every((b) => existsSync(b))).toBe(true);
  });

  it('drops a bundle unused for a week, and one whose inputs are gone', () => {
    const { dir, bundles } = cacheOf(3, (i) => [2 * HOUR, 8 * 24 * HOUR, 2 * HOUR][i]);
    writeFileSync(
      join(dir, `${hex(2)}.json`),
      JSON.stringify({ inputs: [join(dir, 'gone.ts')], stamp: hex(1_002) }),
    );
    pruneBundles(dir);
    expect(bundles.map((b) => existsSync(b))).toEqual([true, false, false]);
  });
});

describe('tensorcomm cache', () => {
  it('says where the bundles are and how large; --clear removes them, an unknown flag is a usage error', async () => {
    const dir = mkdtempSync(join(scratch, 'cli-cache-'));
    mkdirSync(join(dir, `${'a'.repeat(20)}-${'b'.repeat(20)}`));
    writeFileSync(join(dir, `${'a'.repeat(20)}-${'b'.repeat(20)}`, 'entry.mjs'), 'x'.repeat(2 ** 20));
    const lines: string[] = [];
    expect(await cacheCommand([], (line) => lines.push(line), dir)).toBe(0);
    expect(lines).toEqual([`${dir}: 1 bundles, 1.0 MiB`]);
    expect(await cacheCommand(['--clean'], () => {}, dir)).toBe(2);
    expect(existsSync(dir)).toBe(true);
    expect(await cacheCommand(['--clear'], (line) => lines.push(line), dir)).toBe(0);
    expect(lines[1]).toBe(`removed ${dir}: 1 bundles, 1.0 MiB`);
    expect(existsSync(dir)).toBe(false);
  });
});
