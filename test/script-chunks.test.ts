/**
 * Rank threads run the library's own chunks of a bundle as classic scripts
 * compiled from a V8 code cache (src/launch/script-chunks.ts,
 * script-chunk-loader.ts): the first job writes the caches, later ones load
 * from them; a damaged cache is rejected and written again; the user's
 * entries get a CommonJS twin line for line, so a thread starts without the
 * ES module loader and keeps the entry's source lines; only chunks that load
 * the same as scripts are converted; nothing prints a warning; and library
 * code imports dynamically only through importModule (a function from a code
 * cache cannot `import()`).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import * as esbuild from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { launchProcesses, spawnThreads } from '../src/index.ts';
import { writeScriptChunks } from '../src/launch/script-chunks.ts';
import { entryBundle, PACKAGE_ROOT, rootImporter } from './fixtures/root-importer.ts';

const exec = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'tensorcomm-script-chunks-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const SRC = fileURLToPath(new URL('../src/', import.meta.url));

interface Loaded {
  chunk: string;
  fromCache: boolean;
}

/** An entry that sums over the world and says which script chunks its thread loaded, and from where. */
const cacheReporter = (name: string) =>
  rootImporter(
    scratch,
    name,
    `export default async function main(ctx) {
  const t = Tensor.full([4], ctx.rank + 1);
  await ctx.world.allReduce(t);
  return { sum: t.toArray()[0], loaded: globalThis[Symbol.for('tensorcomm.codeCaches')].loaded() };
}`,
  );

const byCache = (loaded: Loaded[]) =>
  Object.fromEntries(loaded.map(({ chunk, fromCache }) => [chunk.split('/').pop(), fromCache]));

describe('script chunks', () => {
  it('load from the code cache the first job wrote; a damaged cache is rejected and written again', async () => {
    const file = cacheReporter('reporter.mjs');
    const bundle = await entryBundle(file);
    const dir = dirname(fileURLToPath(bundle!.setupUrl));
    const scripts = readdirSync(dir).filter((name) => name.endsWith('.script.js'));
    expect(scripts).toContain('setup.script.js');
    expect(scripts).toContain('rank-worker.script.js');
    expect(readFileSync(join(dir, 'setup.mjs'), 'utf8')).toContain('loadScriptChunk');
    expect(readFileSync(join(dir, 'entry.mjs'), 'utf8')).not.toContain('loadScriptChunk');
    const caches = () => readdirSync(dir).filter((name) => name.endsWith('.v8cache'));
    expect(caches()).toEqual([]);

    const job = () => spawnThreads<{ sum: number; loaded: Loaded[] }>(file, { worldSize: 2 });
    const chunks = scripts.map((name) => name.replace('.script.js', '.mjs'));
    const everyChunk = (fromCache: boolean) => Object.fromEntries(chunks.map((chunk) => [chunk, fromCache]));
    const first = await job();
    expect(first.map((rank) => rank.sum)).toEqual([3, 3]);
    // Every script chunk runs in every thread (the entry imports the package root, as the setup does).
    for (const rank of first) expect(byCache(rank.loaded)).toEqual(everyChunk(false));
    expect(caches().sort()).toEqual(scripts.map((name) => name.replace('.script.js', '.v8cache')).sort());

    for (const rank of await job()) expect(byCache(rank.loaded)).toEqual(everyChunk(true));

    const setupCache = join(dir, 'setup.v8cache');
    const garbage = Buffer.alloc(readFileSync(setupCache).length, 0x5a);
    writeFileSync(setupCache, garbage);
    const damaged = await job();
    expect(damaged.map((rank) => rank.sum)).toEqual([3, 3]);
    for (const rank of damaged)
      expect(byCache(rank.loaded)).toEqual({ ...everyChunk(true), 'setup.mjs': false });
    expect(readFileSync(setupCache).equals(garbage)).toBe(false);
    for (const rank of await job()) expect(byCache(rank.loaded)).toEqual(everyChunk(true));
  });

  it("the job's last rank to finish writes the code caches, none while another still runs (writing them changes V8's flags for every thread a moment)", async () => {
    const file = rootImporter(
      scratch,
      'last-writes.mjs',
      `import { readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
export default async function main(ctx) {
  await ctx.world.barrier();
  if (ctx.rank === 0) return [];
  // Rank 0 has long finished: a cache written at its end would be here.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const [{ chunk }] = globalThis[Symbol.for('tensorcomm.codeCaches')].loaded();
  return readdirSync(dirname(fileURLToPath(chunk))).filter((name) => name.endsWith('.v8cache'));
}`,
    );
    const dir = dirname(fileURLToPath((await entryBundle(file))!.setupUrl));
    expect(await spawnThreads(file, { worldSize: 2 })).toEqual([[], []]);
    expect(readdirSync(dir).filter((name) => name.endsWith('.v8cache'))).toContain('setup.v8cache');
  });

  it('print nothing: a cached job in a process of its own writes no warning', async () => {
    const file = cacheReporter('quiet.mjs');
    const driver = join(scratch, 'driver.mts');
    writeFileSync(
      driver,
      `import { spawnThreads } from ${JSON.stringify(PACKAGE_ROOT)};
for (let job = 0; job < 2; job++) await spawnThreads(${JSON.stringify(file)}, { worldSize: 2 });
`,
    );
    const { stdout, stderr } = await exec(process.execPath, ['--import', 'tsx', driver], { timeout: 60_000 });
    expect({ stdout, stderr }).toEqual({ stdout: '', stderr: '' });
  });

  it('a later process loads every chunk from the code cache an earlier one wrote (V8 takes one only under its own flags)', async () => {
    const file = cacheReporter('processes.mjs');
    const driver = join(scratch, 'cache-driver.mts');
    writeFileSync(
      driver,
      `import { spawnThreads } from ${JSON.stringify(PACKAGE_ROOT)};
const ranks = await spawnThreads(${JSON.stringify(file)}, { worldSize: 2 });
console.log(JSON.stringify(ranks.map((rank) => rank.loaded)));
`,
    );
    const run = async () => {
      const { stdout } = await exec(process.execPath, ['--import', 'tsx', driver], { timeout: 60_000 });
      return (JSON.parse(stdout) as Loaded[][]).map(byCache);
    };
    const first = await run();
    expect(Object.values(first[0]).length).toBeGreaterThan(0);
    for (const rank of await run()) {
      expect(rank).toEqual(Object.fromEntries(Object.keys(first[0]).map((chunk) => [chunk, true])));
    }
  });

  it('process ranks write the code caches of their node, and a later process job loads every chunk from them (the tiering flag set before the first chunk compiles)', async () => {
    const file = cacheReporter('process-caches.mjs');
    const job = () => launchProcesses<{ loaded: Loaded[] }>(file, { nproc: 2, output: () => {} });
    const first = await job();
    const chunks = first[0].loaded.map(({ chunk }) => chunk.split('/').pop());
    expect(chunks.length).toBeGreaterThan(0);
    for (const rank of await job()) {
      expect(byCache(rank.loaded)).toEqual(Object.fromEntries(chunks.map((chunk) => [chunk, true])));
    }
  });

  /**
   * The file V8 compiled the caller's code from, before source maps: a bundle's
   * CommonJS twin (entry.cjs) or the entry's module chunk (entry.mjs). Node 24 and
   * later load the ES module loader's parts for other reasons (formatting a stack
   * with source maps on; 26 in every Worker), so which parts a thread loaded
   * cannot tell.
   */
  const compiledFile = `const prepare = Error.prepareStackTrace;
  Error.prepareStackTrace = (_, frames) => frames[0].getFileName();
  const compiled = new Error('here').stack;
  Error.prepareStackTrace = prepare;`;

  it('a thread whose entry converts runs its CommonJS twin, its stack frames on the source lines, its source map kept through GC', async () => {
    const line = 4;
    const entry = rootImporter(
      scratch,
      'common.mjs',
      `import { findSourceMap } from 'node:module'; import { setFlagsFromString } from 'node:v8'; import { runInNewContext } from 'node:vm';
export default async function main(ctx) {
  await ctx.world.barrier();
  const site = new Error('here').stack.split('\\n')[1];
  ${compiledFile}
  // Node 22 and later keep a CommonJS file's source map only while its module object lives.
  setFlagsFromString('--expose-gc');
  for (let i = 0; i < 3; i++) {
    runInNewContext('gc')();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return { compiled: compiled.split('/').pop(), site, mapKept: findSourceMap(compiled) !== undefined };
}`,
    );
    const bundle = await entryBundle(entry);
    const dir = dirname(fileURLToPath(bundle!.setupUrl));
    expect(
      readdirSync(dir)
        .filter((name) => name.endsWith('.cjs'))
        .sort(),
    ).toEqual(['entry.cjs', 'script-chunk-loader.cjs']);
    for (const rank of await spawnThreads<{ compiled: string; site: string; mapKept: boolean }>(entry, {
      worldSize: 2,
    })) {
      expect(rank).toEqual({
        compiled: 'entry.cjs',
        site: expect.stringContaining(`common.mjs:${line + 1}:`),
        mapKept: true,
      });
    }
    // Top-level await keeps an entry a module: it runs as one.
    const awaiting = rootImporter(
      scratch,
      'awaiting.mjs',
      `const ready = await Promise.resolve(true);
export default async function main(ctx) {
  ${compiledFile}
  return { ready, compiled: compiled.split('/').pop() };
}`,
    );
    expect(await spawnThreads(awaiting, { worldSize: 2 })).toEqual([
      { ready: true, compiled: 'entry.mjs' },
      { ready: true, compiled: 'entry.mjs' },
    ]);
  });

  it('convert only the chunks that load the same as scripts', async () => {
    const input = join(scratch, 'convert-in');
    const output = join(scratch, 'convert-out');
    mkdirSync(input);
    const sources: Record<string, string> = {
      plain: `import { readFileSync } from 'node:fs';\nexport const kind = typeof readFileSync;\nexport default 'plain';`,
      awaits: 'export const one = await Promise.resolve(1);',
      'imports-awaits': `import { one } from './awaits.mjs';\nexport const two = one + 1;`,
      'imports-package': `import { describe } from 'vitest';\nexport const kind = typeof describe;`,
      'imports-chunk-dynamically': `export const load = () => import('./plain.mjs');`,
      'imports-builtin-dynamically': `export const load = () => import('node:os');`,
      'user-plain': `import { kind } from './plain.mjs';\nimport * as os from 'node:os';\nexport default kind + typeof os.cpus;`,
      'user-awaits': `export default await Promise.resolve('user');`,
      'user-imports-package': `import { describe } from 'vitest';\nexport default typeof describe;`,
      // Both import a module of the user's that is no entry: it goes to a chunk of its own, which stays a
      // module (its `let` would be a value in a twin), and so do they.
      'user-first': `import { count } from './user-counter.js';\nexport default count;`,
      'user-second': `import { count } from './user-counter.js';\nexport default count + 1;`,
    };
    writeFileSync(join(input, 'user-counter.js'), 'export let count = 1;');
    for (const [name, text] of Object.entries(sources)) writeFileSync(join(input, `${name}.mjs`), text);
    const { metafile } = await esbuild.build({
      entryPoints: Object.keys(sources).map((name) => join(input, `${name}.mjs`)),
      absWorkingDir: scratch,
      outdir: output,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      external: ['vitest'],
      metafile: true,
      logLevel: 'silent',
    });
    // The library's chunks are those that hold none of the user's modules.
    const own = new Set(
      Object.entries(metafile.outputs)
        .filter(([, { inputs }]) => Object.keys(inputs).every((path) => !path.includes('user-')))
        .map(([path]) => relative(output, join(scratch, path))),
    );
    await writeScriptChunks(esbuild, output, scratch, metafile, own);
    // plain.mjs and the chunk it shares with user-plain.mjs.
    expect(readdirSync(output).filter((name) => name.endsWith('.script.js'))).toEqual([
      expect.stringMatching(/^chunk-\w+\.script\.js$/),
      'plain.script.js',
    ]);
    // The user's entries get a CommonJS twin where they can, and stay as they were.
    expect(
      readdirSync(output)
        .filter((name) => name.endsWith('.cjs'))
        .sort(),
    ).toEqual(['script-chunk-loader.cjs', 'user-plain.cjs']);
    expect((await import(pathToFileURL(join(output, 'user-plain.mjs')).href)).default).toBe(
      'functionfunction',
    );
    expect({ ...(await import(pathToFileURL(join(output, 'plain.mjs')).href)) }).toEqual({
      kind: 'function',
      default: 'plain',
    });
    expect((await import(pathToFileURL(join(output, 'imports-awaits.mjs')).href)).two).toBe(2);
  });

  it('library code imports dynamically only through importModule', () => {
    // Where `import(` may stand: importModule itself, the loader (no code cache's), code written as text,
    // and the command's entry, a process's main module that Node loads itself, never from a code cache.
    const allowed = new Set([
      'cli/tensorcomm.ts',
      'runtime/import-module.ts',
      'launch/script-chunk-loader.ts',
      'launch/module-url.ts',
    ]);
    const offenders: string[] = [];
    const visit = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) visit(path);
        else if (entry.name.endsWith('.ts') && !allowed.has(relative(SRC, path))) {
          readFileSync(path, 'utf8')
            .split('\n')
            .forEach((line, i) => {
              const code = line.replace(/\/\/.*$/, '').trim();
              if (code.startsWith('*') || code.startsWith('/*')) return;
              if (/(?<!typeof )\bimport\(/.test(code)) offenders.push(`${relative(SRC, path)}:${i + 1}`);
            });
        }
      }
    };
    visit(SRC);
    expect(offenders).toEqual([]);
  });
});
