/**
 * Loads a rank bundle's script chunks in a rank thread (script-chunks.ts
 * makes them): each chunk of the library's own code is compiled as a
 * classic script with the V8 code cache its bundle keeps beside it. Node 20
 * keeps no compile cache for ES modules, so every rank thread compiled the
 * whole library again; from a cache it only deserializes, a fraction of the
 * work. The entry's CommonJS twin (module-chunk.ts) runs through Node's
 * CommonJS compiler, which follows its source map. This module is built
 * into a bundle as a CommonJS file of its own, so every chunk of a thread
 * shares its one registry, and a thread can start from it without Node's ES
 * module loader, whose own start each thread would pay.
 */

import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire, Module } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Script } from 'node:vm';
import { threadId } from 'node:worker_threads';
import { debugLog } from '../runtime/debug-log.ts';
import { IMPORTER, type Importer } from '../runtime/import-module.ts';
import { FlagProbe, underFlagsOf } from '../runtime/v8-tiering.ts';
import { CODE_CACHES, type CodeCaches } from './code-caches.ts';

/** The module wrapper: a chunk's text becomes the body of this function, strict as the module it was. */
const WRAPPER_HEAD = "(function (exports, require, module) {'use strict';";
const WRAPPER_TAIL = '\n})';

interface ChunkModule {
  exports: unknown;
  /**
   * The Node module a CommonJS twin was compiled as, held for the thread's life: Node 22 and later
   * keeps a file's source map only while its module object lives (a weak reference), and a
   * collected one took the user's frames out of every later stack trace.
   */
  compiled?: Module;
}
type ChunkFunction = (exports: unknown, require: (specifier: string) => unknown, module: ChunkModule) => void;
/** What Node's CommonJS loader does with a file's text: wrap, compile (its source map noted), run. */
interface CompilableModule {
  _compile(content: string, filename: string): void;
}

/** A chunk compiled without a usable cache (none yet, or V8 rejected it: another Node, other flags). */
interface Uncached {
  script: Script;
  cachePath: string;
  /** Compiled under the flags compileFlags was made under (else under the tiering flag, turned on since). */
  underCompileFlags: boolean;
}

/**
 * The files of a chunk `name.mjs`: the script of a library chunk and its code
 * cache, or the CommonJS twin of a chunk of the user's code (module-chunk.ts).
 */
export function scriptChunkFiles(chunkPath: string): { script: string; cache: string; commonJs: string } {
  const base = chunkPath.replace(/\.mjs$/, '');
  return { script: `${base}.script.js`, cache: `${base}.v8cache`, commonJs: `${base}.cjs` };
}

const modules = new Map<string, ChunkModule>();
const fromCache = new Map<string, boolean>();
/** This thread's caches are worth writing for these, until they are written. */
let uncached: Uncached[] = [];

/** The bundle's directory: that of the first chunk loaded, since every chunk of a bundle lies in it. */
let bundleDir: string | undefined;
/**
 * V8's flags when this thread first compiled a chunk without a usable cache:
 * in a rank thread, V8's own, if that was before its ranks turned tiering on.
 */
let compileFlags: FlagProbe | undefined;

/**
 * The library's dynamic imports (runtime/import-module.ts): a chunk of this
 * bundle that was converted is loaded as what it became, without Node's ES
 * module loader; anything else through this module's own import(), which,
 * unlike a function from a code cache, has what import() needs.
 */
const importer: Importer = (specifier) => {
  if (!converted(specifier)) return import(specifier);
  return new Promise((resolve) => resolve(loadScriptChunk(specifier)));
};

function converted(url: string): boolean {
  if (!url.startsWith('file:') || !url.endsWith('.mjs')) return false;
  const path = fileURLToPath(url);
  if (dirname(path) !== bundleDir) return false;
  const files = scriptChunkFiles(path);
  return existsSync(files.script) || existsSync(files.commonJs);
}

function firstLoad(dir: string): void {
  bundleDir = dir;
  const registry = globalThis as { [CODE_CACHES]?: CodeCaches; [IMPORTER]?: Importer };
  registry[CODE_CACHES] = {
    save: saveStaleCaches,
    loaded: () => [...fromCache].map(([chunk, cached]) => ({ chunk, fromCache: cached })),
  };
  registry[IMPORTER] = importer;
}

function readCache(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch {
    // None written yet (a bundle's first job), or removed: the chunk compiles from source.
    return undefined;
  }
}

/**
 * A chunk's exports as values rather than esbuild's two layers of getters
 * (a call each, on every use from another chunk, until V8 optimizes the
 * caller). Its exports are settled once it has run: chunks import each other
 * without cycles (a chunk holds what the same set of entries reaches, and
 * imports only chunks that more entries reach), and none exports a `let`.
 */
function plainExports(exports: Record<string, unknown>): Record<string, unknown> {
  // esbuild's scripts read a default export through __toESM, which asks for this flag.
  const plain: Record<string, unknown> = Object.defineProperty({}, '__esModule', { value: true });
  for (const name of Object.keys(exports)) plain[name] = exports[name];
  return plain;
}

/**
 * The exports of the chunk at `chunkUrl` from what replaces it, run once per
 * thread: its script (a library chunk) or its CommonJS twin (the user's).
 */
export function loadScriptChunk(chunkUrl: string): unknown {
  const known = modules.get(chunkUrl);
  if (known !== undefined) return known.exports;
  const files = scriptChunkFiles(fileURLToPath(chunkUrl));
  if (modules.size === 0) firstLoad(dirname(files.script));
  const module: ChunkModule = { exports: {} };
  const nodeRequire = createRequire(chunkUrl);
  // A chunk requires other chunks by relative path; anything else is Node's.
  const require = (specifier: string) =>
    specifier.startsWith('.') ? loadScriptChunk(new URL(specifier, chunkUrl).href) : nodeRequire(specifier);
  // Registered before it runs: a chunk that another chunk it imports imports back gets its exports so far.
  modules.set(chunkUrl, module);
  try {
    if (existsSync(files.commonJs)) return loadCommonJs(files.commonJs, module, require);
    runScript(chunkUrl, files, module, require);
  } catch (error) {
    // As a module that throws: every later import throws again, none gets half its exports.
    modules.delete(chunkUrl);
    throw error;
  }
  module.exports = plainExports(module.exports as Record<string, unknown>);
  return module.exports;
}

/**
 * Runs a chunk of the user's code, as CommonJS, through Node's own module
 * compiler, which applies its source map to stack traces (Node 20 maps no
 * vm.Script's frames); its exports are what it assigned.
 */
function loadCommonJs(path: string, module: ChunkModule, require: (specifier: string) => unknown): unknown {
  const compiled = new Module(path) as Module & CompilableModule;
  compiled.filename = path;
  compiled.require = require as NodeJS.Require;
  compiled._compile(readFileSync(path, 'utf8'), path);
  module.compiled = compiled;
  module.exports = compiled.exports;
  return module.exports;
}

function runScript(
  chunkUrl: string,
  files: ReturnType<typeof scriptChunkFiles>,
  module: ChunkModule,
  require: (specifier: string) => unknown,
): void {
  // V8 takes a code cache only under the flags it was made with: a rank loads its chunks under V8's own
  // flags (a rank thread's launcher keeps them while threads start), and only a rank thread turns tiering
  // on, past the job's start-up barrier (runtime/v8-tiering.ts).
  const cachedData = readCache(files.cache);
  const script = new Script(`${WRAPPER_HEAD}${readFileSync(files.script, 'utf8')}${WRAPPER_TAIL}`, {
    // Stack frames name the file whose lines they give: the script, not its stand-in.
    filename: pathToFileURL(files.script).href,
    // No importModuleDynamically: a function from a code cache loses it anyway, so chunks import
    // through the importer registered above (runtime/import-module.ts), and a stray import() fails at once.
    cachedData,
  });
  const cached = cachedData !== undefined && script.cachedDataRejected !== true;
  fromCache.set(chunkUrl, cached);
  if (!cached) {
    compileFlags ??= new FlagProbe();
    uncached.push({ script, cachePath: files.cache, underCompileFlags: compileFlags.matches() });
  }
  (script.runInThisContext() as ChunkFunction)(module.exports, require, module);
}

/**
 * Writes the code cache of each chunk this thread compiled without one,
 * once a job has run (so they hold what its calls compiled, not only the
 * chunks' top level), under the flags it compiled the chunk under, which are
 * those a later thread compiles it under: a rank thread loads the library
 * under V8's own flags and runs its job under the tiering flag
 * (runtime/v8-tiering.ts). Whole files, renamed into place: threads and
 * processes of the same bundle may race, and a reader sees an old cache or a
 * new one. Best effort: a cache that cannot be written leaves the next thread
 * compiling.
 */
function saveStaleCaches(): void {
  const chunks = uncached;
  uncached = [];
  writeCaches(chunks.filter((chunk) => !chunk.underCompileFlags));
  const early = chunks.filter((chunk) => chunk.underCompileFlags);
  if (early.length === 0 || compileFlags === undefined) return;
  if (!underFlagsOf(compileFlags, () => writeCaches(early)))
    debugLog(
      'no code caches written for %d chunks: V8 could not be given the flags they compiled under again',
      early.length,
    );
}

function writeCaches(chunks: readonly Uncached[]): void {
  for (const chunk of chunks) {
    const partial = `${chunk.cachePath}.${process.pid}-${threadId}.tmp`;
    try {
      writeFileSync(partial, chunk.script.createCachedData());
      renameSync(partial, chunk.cachePath);
    } catch (error) {
      rmSync(partial, { force: true });
      debugLog('no code cache written for %s, so later threads compile it again: %s', chunk.cachePath, error);
    }
  }
}
