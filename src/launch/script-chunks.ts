/**
 * Turns a rank bundle's chunks into what a rank thread loads without Node's
 * ES module loader (script-chunk-loader.ts). Each chunk holding only this
 * library's code becomes its CommonJS text in `chunk.script.js`, compiled
 * with a V8 code cache in each thread, and, in its place, a module that
 * loads it and exports what it exported, for chunks that stay modules. An
 * entry's chunk of the user's code gets a CommonJS twin, `entry.cjs`, with the
 * same lines (module-chunk.ts), so its source map still fits, and stays as it
 * is. (A chunk that entries share stays a module: it may export a binding that
 * changes, and a twin's exports are values.)
 * The loader goes beside them, CommonJS too: a thread starts from it.
 *
 * A chunk is converted only where nothing changes for its code: it imports
 * statically only Node's built-in modules and other converted chunks (a
 * package may be an ES module, which a script cannot require), imports
 * nothing dynamically by name, and converts cleanly (no top-level await, no
 * `import.meta`, no form the line-for-line rewrite does not know).
 */

import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { isBuiltin, Module } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import type { Metafile } from 'esbuild';
import { commonJsChunk } from './module-chunk.ts';
import { scriptChunkFiles } from './script-chunk-loader.ts';

type Esbuild = typeof import('esbuild');

const LOADER_FILE = 'script-chunk-loader.cjs';
const LOADER_SOURCE = new URL(
  `./script-chunk-loader${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
  import.meta.url,
);
/** The module's own name for the loaded chunk: no export may be called so. */
const CHUNK_BINDING = '__tensorcommScriptChunk';
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

interface Chunk {
  imports: Metafile['outputs'][string]['imports'];
  exports: string[];
  /** The chunk's CommonJS text. */
  script: string;
  /** A chunk of the user's code: its CommonJS twin goes beside it, which keeps its lines (module-chunk.ts). */
  user: boolean;
}

/** The module that stands where the chunk was: loads its script and exports its exports. */
function standIn(exports: readonly string[]): string {
  const named = exports.filter((name) => name !== 'default');
  const lines = [
    `import loader from "./${LOADER_FILE}";`,
    `const ${CHUNK_BINDING} = loader.loadScriptChunk(import.meta.url);`,
  ];
  if (named.length > 0) lines.push(`export const { ${named.join(', ')} } = ${CHUNK_BINDING};`);
  if (exports.includes('default')) lines.push(`export default ${CHUNK_BINDING}.default;`);
  return `${lines.join('\n')}\n`;
}

/** The chunks of `dir` that convert cleanly, by file name: the own ones through esbuild, the user's line for line. */
async function converted(
  esbuild: Esbuild,
  dir: string,
  workingDir: string,
  metafile: Metafile,
  own: ReadonlySet<string>,
): Promise<Map<string, Chunk>> {
  const chunks = new Map<string, Chunk>();
  for (const [output, { imports, exports, entryPoint }] of Object.entries(metafile.outputs)) {
    const file = relative(dir, resolve(workingDir, output));
    if (!file.endsWith('.mjs')) continue;
    const text = await readFile(join(dir, file), 'utf8');
    if (!own.has(file)) {
      // Only an entry: its exports are read once it has run, where a chunk another imports could export a
      // binding that changes later, and the twin's exports are values.
      const script = entryPoint === undefined ? undefined : commonJsChunk(text);
      if (script !== undefined && compiles(script))
        chunks.set(file, { imports, exports, script, user: true });
      continue;
    }
    if (exports.some((name) => name === CHUNK_BINDING || !IDENTIFIER.test(name))) continue;
    try {
      const { code, warnings } = await esbuild.transform(text, {
        format: 'cjs',
        loader: 'js',
        platform: 'node',
        target: 'node20',
        charset: 'ascii',
        logLevel: 'silent',
      });
      if (warnings.length === 0) chunks.set(file, { imports, exports, script: code, user: false });
    } catch {
      // Left a module: what esbuild cannot express as a script (top-level await) stays as it was.
    }
  }
  return chunks;
}

/** Whether CommonJS `text` compiles as Node's loader wraps it: top-level await, or a `require` of its own, does not. */
function compiles(text: string): boolean {
  try {
    new Script(Module.wrap(text));
    return true;
  } catch {
    return false;
  }
}

/** Drops, until none is left to drop, each chunk that imports what a script chunk cannot. */
function keepLoadable(chunks: Map<string, Chunk>, dir: string, workingDir: string): void {
  // A script chunk has no import() of its own (script-chunk-loader.ts): any dynamic import keeps a chunk a module.
  const loadable = ({ path, kind, external }: Chunk['imports'][number]) =>
    kind === 'import-statement' &&
    (external ? isBuiltin(path) : chunks.has(relative(dir, resolve(workingDir, path))));
  for (let dropped = true; dropped; ) {
    dropped = false;
    for (const [file, chunk] of chunks) {
      if (chunk.imports.every(loadable)) continue;
      chunks.delete(file);
      dropped = true;
    }
  }
}

/**
 * Converts the chunks of `dir` (esbuild's output, `metafile` its record,
 * paths relative to `workingDir`) named in `own` where they can be; the
 * loader goes beside them when any is. Resolves to the loader's own inputs
 * (absolute paths), which the bundle's stamp must cover too.
 */
export async function writeScriptChunks(
  esbuild: Esbuild,
  dir: string,
  workingDir: string,
  metafile: Metafile,
  own: ReadonlySet<string>,
): Promise<string[]> {
  const chunks = await converted(esbuild, dir, workingDir, metafile, own);
  keepLoadable(chunks, dir, workingDir);
  if (chunks.size === 0) return [];
  const loader = await esbuild.build({
    entryPoints: [fileURLToPath(LOADER_SOURCE)],
    outfile: join(dir, LOADER_FILE),
    absWorkingDir: workingDir,
    bundle: true,
    // CommonJS, so that a rank thread can start from it without Node's ES module loader.
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    charset: 'ascii',
    logLevel: 'silent',
    metafile: true,
  });
  for (const [file, chunk] of chunks) {
    const path = join(dir, file);
    const files = scriptChunkFiles(path);
    // A user's chunk stays as it is too, for whoever imports it as a module; a library chunk's stand-in replaces it.
    if (chunk.user) await writeFile(files.commonJs, chunk.script);
    else {
      await writeFile(files.script, chunk.script);
      await writeFile(path, standIn(chunk.exports));
    }
  }
  return Object.keys(loader.metafile.inputs).map((input) => resolve(workingDir, input));
}

/** The loader that starts a rank thread from the bundle's chunk at `chunkUrl`, where that chunk was converted. */
export function scriptLoaderFor(chunkUrl: URL): string | undefined {
  const path = fileURLToPath(chunkUrl);
  const loader = join(dirname(path), LOADER_FILE);
  return existsSync(scriptChunkFiles(path).script) && existsSync(loader) ? loader : undefined;
}
