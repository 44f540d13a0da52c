/**
 * The modules a job's rank threads load, bundled once by esbuild into a few
 * JavaScript files: the rank bootstrap, the rank setup and the entry, with
 * the modules they share in shared chunks, so each is one instance in a
 * thread (the entry's Tensor is the setup's Tensor). A thread then loads a
 * handful of files instead of ~150 modules, and a TypeScript entry (or this
 * library's own sources, under vitest or tsx) is transpiled once here rather
 * than by a tsx loader thread per rank, which cost seconds per job.
 *
 * Packages from node_modules stay out of the bundle, imported by absolute
 * URL (one instance per thread, loaded lazily where the code says so); every
 * module keeps its own import.meta.url, and source maps point stack traces
 * at the user's files (a chunk of this library's code alone keeps none:
 * dropOwnSourceMaps). Bundles are cached under the temp directory
 * (cached-bundles.ts), keyed by the three modules and the Node version and
 * stamped by their inputs' sizes and mtimes, so an edited file is rebuilt and
 * an unchanged one is not, across processes too.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Loader, Metafile, Plugin } from 'esbuild';
import { OWN_FOLDERS } from '../debug/call-site.ts';
import { BUNDLE_CACHE_DIR } from '../runtime/bundle-cache.ts';
import { debugLog } from '../runtime/debug-log.ts';
import { within } from '../runtime/within.ts';
import { adoptKernelBytes, kernelBytes } from '../tensor/simd-kernels.ts';
import {
  bundleKey,
  cachedBundle,
  type Manifest,
  packageScopes,
  pruneBundles,
  stampOf,
} from './cached-bundles.ts';
import { writeScriptChunks } from './script-chunks.ts';

export interface RankBundle {
  /** The rank bootstrap (rank-worker) to start each thread from. */
  worker: URL;
  /** Imported by each rank in place of the rank setup module and of the entry. */
  setupUrl: string;
  entryUrl: string;
}

/** Bumped when what a bundle holds changes, so older cached bundles are not used. */
const LAYOUT = 8;
const PACKAGE_DIR = fileURLToPath(new URL('../../', import.meta.url));
/** The library's own modules (src/, or dist/ when installed), its index among them. */
const LIBRARY_DIR = fileURLToPath(new URL('../', import.meta.url));
const OWN_DEPENDENCIES = join(PACKAGE_DIR, 'node_modules', sep);
const PACKAGE_JSON = join(PACKAGE_DIR, 'package.json');
const NAMES = ['rank-worker', 'setup', 'entry'] as const;
/** A thread bundle keeps the reduction kernels' WebAssembly bytes, so no process assembles them again (tensor/simd-kernels.ts). */
const KERNELS_FILE = 'kernels.wasm';
const RESOLVING = Symbol('resolving');
/** Far more than any build takes: one past this has hung, and the job loads its modules unbundled (every wait has a timeout). */
const BUILD_TIMEOUT_MS = 120_000;

const fileIn = (dir: string, name: string) => pathToFileURL(join(dir, `${name}.mjs`));

function bundleAt(dir: string): RankBundle {
  return {
    worker: fileIn(dir, 'rank-worker'),
    setupUrl: fileIn(dir, 'setup').href,
    entryUrl: fileIn(dir, 'entry').href,
  };
}

const cached = (key: string) => cachedBundle(BUNDLE_CACHE_DIR, key);

function loaderOf(path: string): Loader {
  return /\.[cm]?tsx?$/.test(path) ? (path.endsWith('x') ? 'tsx' : 'ts') : path.endsWith('x') ? 'jsx' : 'js';
}

/** Packages stay external, by absolute URL; tensorcomm itself is bundled, wherever it is installed. */
function externalPackages(): Plugin {
  return {
    name: 'tensorcomm-external-packages',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === RESOLVING) return undefined;
        const found = await build.resolve(args.path, {
          kind: args.kind,
          importer: args.importer,
          resolveDir: args.resolveDir,
          pluginData: RESOLVING,
        });
        if (found.errors.length > 0 || found.external) return undefined;
        const inPackage = found.path.startsWith(PACKAGE_DIR) && !found.path.startsWith(OWN_DEPENDENCIES);
        if (inPackage || !found.path.includes(`${sep}node_modules${sep}`)) return { path: found.path };
        return { path: pathToFileURL(found.path).href, external: true };
      });
    },
  };
}

/**
 * In a rank thread the package root loads the thread side of its setup only
 * (see thread-setup.ts): what registers the process launchers stays out of
 * the bundle, and with it the code only process ranks use.
 */
function threadSetupOnly(): Plugin {
  return {
    name: 'tensorcomm-thread-setup-only',
    setup(build) {
      build.onResolve({ filter: /^\.\/setup\.[jt]s$/ }, ({ path, importer }) =>
        /^index\.[jt]s$/.test(relative(LIBRARY_DIR, importer))
          ? { path: join(LIBRARY_DIR, `thread-${path.slice(2)}`) }
          : undefined,
      );
    },
  };
}

/**
 * Each module's import.meta.url (and filename, dirname) stays its own file's,
 * not the bundle's; and the user's entries (`entries`, paths) are ES modules
 * whatever their package says. esbuild reads a file that imports but exports
 * nothing, in a `"type": "commonjs"` package (what `npm init` writes), as
 * CommonJS: a test file became a lazy wrapper that initialised the library's
 * modules in the wrong order ("Class extends value undefined"). vitest runs a
 * test file as an ES module, and a rank runs it as vitest did. An empty export
 * at its end says so without moving a line.
 */
function ownSources(transform: typeof import('esbuild').transform, entries: ReadonlySet<string>): Plugin {
  return {
    name: 'tensorcomm-own-sources',
    setup(build) {
      build.onLoad({ filter: /\.[cm]?[jt]sx?$/ }, async ({ path }) => {
        const source = await readFile(path, 'utf8');
        const asModule = entries.has(path) && !/\.c[jt]sx?$/.test(path);
        const marked = (code: string) => (asModule ? `${code}\nexport {};\n` : code);
        if (!source.includes('import.meta')) {
          if (!asModule) return undefined;
          return { contents: marked(source), loader: loaderOf(path), resolveDir: dirname(path) };
        }
        const { code } = await transform(source, {
          loader: loaderOf(path),
          format: 'esm',
          sourcefile: path,
          sourcemap: 'inline',
          define: {
            'import.meta.url': JSON.stringify(pathToFileURL(path).href),
            'import.meta.filename': JSON.stringify(path),
            'import.meta.dirname': JSON.stringify(dirname(path)),
          },
        });
        return { contents: marked(code), loader: 'js', resolveDir: dirname(path) };
      });
    },
  };
}

/**
 * Drops the source map of each chunk in `dir` that holds only this library's
 * code. With source maps on, the first stack formatted in a thread that shows
 * a frame of such a chunk parses its whole map: with many ranks, half the
 * threads did so in a start-up barrier (its slow wait publishes the rank's
 * call sites), each paying time and heap for the whole library's map, even
 * cut to one mapping per line. Its frames keep the bundle's file and line, which is how call sites
 * tell them from the user's (chunks with any of the user's code keep every
 * mapping). Returns the chunks whose maps it dropped: those of this library alone.
 */
function dropOwnSourceMaps(dir: string): Set<string> {
  const ownChunks = new Set<string>();
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.map')) continue;
    const path = join(dir, file);
    const map = JSON.parse(readFileSync(path, 'utf8')) as { sources: string[] };
    const own = map.sources.every((source) =>
      OWN_FOLDERS.some((folder) => resolve(dir, source).startsWith(folder)),
    );
    if (!own) continue;
    rmSync(path);
    const chunk = path.slice(0, -'.map'.length);
    const comment = `\n//# sourceMappingURL=${file}\n`;
    writeFileSync(chunk, readFileSync(chunk, 'utf8').replace(comment, '\n'));
    ownChunks.add(file.slice(0, -'.map'.length));
  }
  return ownChunks;
}

/**
 * Makes each chunk in `dir` pure ASCII: esbuild escapes every other
 * character of strings, templates and names (charset ascii), but keeps
 * comments and regular expression literals as written, and a single '→' in
 * one makes V8 hold the chunk's source in two bytes a character, doubling
 * its memory in every rank thread. Each such UTF-16 unit becomes its `\uXXXX`
 * escape, which means the same character in a regular expression (a test's
 * `toThrow(/≥ 0/)`) and is harmless in a comment; columns after it on its
 * line shift, which only a stack trace pointing past it shows.
 */
function asciiOnly(dir: string): void {
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.mjs')) continue;
    const path = join(dir, file);
    const text = readFileSync(path, 'utf8');
    if (/[^\0-\x7f]/.test(text)) writeFileSync(path, text.replace(/[^\0-\x7f]/g, unicodeEscape));
  }
}

function unicodeEscape(unit: string): string {
  return `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * A CommonJS entry (`module.exports = main`, `require('tensorcomm')`) is not
 * bundled: esbuild would wrap the library it requires in lazy initialisers,
 * whose order breaks classes that extend one another. Its ranks load it as
 * Node does (unbundled), where require() of the library gives the instance
 * the rank's setup imported.
 */
function refuseCommonJsEntries(metafile: Metafile, userEntries: readonly string[]): void {
  const paths = new Set(userEntries.map((url) => fileURLToPath(url)));
  for (const [input, { format }] of Object.entries(metafile.inputs)) {
    const path = resolve(PACKAGE_DIR, input);
    // Only the reason unbundled() notes (NODE_DEBUG=tensorcomm): the ranks load the entry as Node does.
    if (paths.has(path) && format === 'cjs') throw new Error(`${path} is CommonJS: loaded unbundled`);
  }
}

interface BuildOptions {
  banner?: string;
  /** The entries (file URLs) that are the user's: ES modules, whatever their package says. */
  userEntries?: string[];
  /** Plugins that go before the bundle's own. */
  first?: Plugin[];
  /** Rank threads load the library's own chunks as scripts with code caches (script-chunks.ts). */
  scriptChunks?: boolean;
}

/**
 * The thread bundle in `dir`, its kernels compiled for this process to hand
 * its rank threads (rank-context.ts), unless it has them already; a bundle
 * without them (or an unreadable file) leaves the process to assemble its own.
 */
function threadBundleAt(dir: string): string {
  try {
    adoptKernelBytes(readFileSync(join(dir, KERNELS_FILE)));
  } catch (error) {
    debugLog('the reduction kernels are assembled again: %s', error);
  }
  return dir;
}

/** Bundles `entries` (output name → file URL) into the cache under `key`; resolves to the bundle's directory. */
async function build(
  key: string,
  entries: Record<string, string>,
  { banner, userEntries = [], first = [], scriptChunks = false }: BuildOptions,
): Promise<string> {
  // esbuild is CommonJS: required, so this works in a script chunk too (runtime/import-module.ts).
  const require = createRequire(import.meta.url);
  const esbuild = require('esbuild') as typeof import('esbuild');
  mkdirSync(BUNDLE_CACHE_DIR, { recursive: true });
  const building = join(BUNDLE_CACHE_DIR, `${key}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const { metafile } = await within(
      esbuild.build({
        entryPoints: Object.fromEntries(
          Object.entries(entries).map(([name, url]) => [name, fileURLToPath(url)]),
        ),
        banner: banner === undefined ? undefined : { js: banner },
        absWorkingDir: PACKAGE_DIR,
        outdir: building,
        outExtension: { '.js': '.mjs' },
        bundle: true,
        splitting: true,
        format: 'esm',
        platform: 'node',
        target: 'node20',
        // Bundling renames clashing top-level names; error classes must keep theirs.
        keepNames: true,
        charset: 'ascii',
        sourcemap: 'linked',
        sourcesContent: false,
        metafile: true,
        logLevel: 'silent',
        plugins: [
          ...first,
          externalPackages(),
          ownSources(esbuild.transform, new Set(userEntries.map((url) => fileURLToPath(url)))),
        ],
      }),
      BUILD_TIMEOUT_MS,
      'bundling the rank modules with esbuild',
      // Its service is a child process: stopped, the next build starts another.
      () => esbuild.stop(),
    );
    refuseCommonJsEntries(metafile, userEntries);
    const ownChunks = dropOwnSourceMaps(building);
    if (scriptChunks) writeFileSync(join(building, KERNELS_FILE), kernelBytes());
    asciiOnly(building);
    const loaderInputs = scriptChunks
      ? await writeScriptChunks(esbuild, building, PACKAGE_DIR, metafile, ownChunks)
      : [];
    const sources = [
      ...Object.keys(metafile.inputs).map((input) => resolve(PACKAGE_DIR, input)),
      ...loaderInputs,
    ];
    const inputs = [
      ...new Set([
        ...sources,
        ...packageScopes(sources),
        // Its `sideEffects` decides which of the library's modules a bundle leaves out.
        PACKAGE_JSON,
        // Another esbuild may make other code of the same inputs.
        require.resolve('esbuild'),
      ]),
    ];
    const stamp = stampOf(inputs);
    const dir = join(BUNDLE_CACHE_DIR, `${key}-${stamp}`);
    try {
      renameSync(building, dir);
    } catch (error) {
      // Another process built the same inputs first: theirs is as good.
      if (!existsSync(dir)) throw error;
    }
    const manifest = join(BUNDLE_CACHE_DIR, `${key}.json`);
    writeFileSync(`${building}.json`, JSON.stringify({ inputs, stamp } satisfies Manifest));
    renameSync(`${building}.json`, manifest);
    pruneBundles(BUNDLE_CACHE_DIR);
    return dir;
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

/**
 * Why `what` loads unbundled. Not an error: a CommonJS entry never bundles, a
 * broken one fails in its ranks with its own error, and anything else only
 * makes the start slower, which NODE_DEBUG=tensorcomm then explains.
 */
function unbundled(what: string, error: unknown): undefined {
  debugLog('%s: loaded unbundled (a slower start): %s', what, error);
  return undefined;
}

/**
 * The bundle of these three modules (file URLs), built or taken from the
 * cache; undefined when they cannot be bundled (not files, or esbuild fails
 * on them), and the job then loads them as they are, so a broken entry fails
 * in its ranks with its own error, as without bundling.
 */
export async function rankBundle(
  workerUrl: string,
  setupUrl: string,
  entryUrl: string,
): Promise<RankBundle | undefined> {
  const modules = [workerUrl, setupUrl, entryUrl];
  if (!modules.every((url) => url.startsWith('file:'))) return undefined;
  const key = bundleKey(LAYOUT, ...modules);
  try {
    const dir =
      cached(key) ??
      (await build(key, Object.fromEntries(NAMES.map((name, i) => [name, modules[i]])), {
        userEntries: [entryUrl],
        first: [threadSetupOnly()],
        scriptChunks: true,
      }));
    return bundleAt(threadBundleAt(dir));
  } catch (error) {
    return unbundled(`the rank modules of ${entryUrl}`, error);
  }
}

/** What a test file's warm rank threads load (RankThreadPool): the pool bootstrap, setup, entry and the test file. */
export interface TestFileBundle {
  worker: URL;
  setupUrl: string;
  entryUrl: string;
  /** The test file, as the bundle holds it: its `vitest` is `standInUrl`, everywhere but in the stand-in. */
  fileUrl: string;
}

/** `import … from 'vitest'` resolved to the stand-in, but the stand-in's own (the real vitest, external). */
function vitestStandIn(standInUrl: string): Plugin {
  const standIn = fileURLToPath(standInUrl);
  return {
    name: 'tensorcomm-vitest-stand-in',
    setup(build) {
      build.onResolve({ filter: /^vitest$/ }, (args) =>
        args.importer === standIn ? undefined : { path: standIn },
      );
    },
  };
}

/**
 * The bundle of a rankTest file's warm threads (file URLs): the pool bootstrap,
 * the setup, the rank-test entry and the test file itself, its `vitest`
 * pointed at `standInUrl` at build time (what vitest-redirect.ts does with a
 * resolve hook for a thread that loads the file as it is), so the threads
 * start without a TypeScript loader. Undefined where they cannot be bundled.
 */
export async function testFileBundle(
  workerUrl: string,
  setupUrl: string,
  entryUrl: string,
  fileUrl: string,
  standInUrl: string,
): Promise<TestFileBundle | undefined> {
  const modules = [workerUrl, setupUrl, entryUrl, fileUrl, standInUrl];
  if (!modules.every((url) => url.startsWith('file:'))) return undefined;
  const key = bundleKey(LAYOUT, 'test-file', ...modules);
  const entries = { 'pool-worker': workerUrl, setup: setupUrl, entry: entryUrl, 'test-file': fileUrl };
  try {
    const dir = threadBundleAt(
      cached(key) ??
        (await build(key, entries, {
          userEntries: [fileUrl],
          first: [vitestStandIn(standInUrl), threadSetupOnly()],
          scriptChunks: true,
        })),
    );
    return {
      worker: fileIn(dir, 'pool-worker'),
      setupUrl: fileIn(dir, 'setup').href,
      entryUrl: fileIn(dir, 'entry').href,
      fileUrl: fileIn(dir, 'test-file').href,
    };
  } catch (error) {
    return unbundled(`the rank threads of ${fileUrl}`, error);
  }
}

/**
 * A script (file URL) bundled alone, for `node` to run without a TypeScript
 * loader, as `node --import tsx script.ts` would run it: its process.argv[1]
 * is set back to the script's own path, so a check whether it is the main
 * module still holds. Run it with --enable-source-maps for the script's own
 * lines in stack traces. Undefined where it cannot be bundled.
 */
export async function scriptBundle(scriptUrl: string): Promise<URL | undefined> {
  if (!scriptUrl.startsWith('file:')) return undefined;
  const key = bundleKey(LAYOUT, 'script', scriptUrl);
  const banner = `process.argv[1] = ${JSON.stringify(fileURLToPath(scriptUrl))};`;
  try {
    return fileIn(
      cached(key) ?? (await build(key, { script: scriptUrl }, { banner, userEntries: [scriptUrl] })),
      'script',
    );
  } catch (error) {
    return unbundled(`the script ${scriptUrl}`, error);
  }
}
