/**
 * Turns the chunks of a rank bundle that hold only this library's code into
 * script chunks (script-chunk-loader.ts compiles them with a V8 code cache
 * in each rank thread). Each such `chunk.mjs` becomes its CommonJS text in
 * `chunk.script.js` and, in its place, a module that loads it and exports
 * what it exported, so the user's chunks and entries import it as before.
 *
 * A chunk is converted only where nothing changes for its code: it imports
 * statically only Node's built-in modules and other converted chunks (a
 * package may be an ES module, which a script cannot require), imports
 * nothing dynamically by name, and esbuild converts it without a warning
 * (top-level await, import.meta).
 */

import { readFile, writeFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Metafile } from 'esbuild';
import { scriptChunkFiles } from './script-chunk-loader.ts';

type Esbuild = typeof import('esbuild');

const LOADER_FILE = 'script-chunk-loader.mjs';
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
}

/** The module that stands where the chunk was: loads its script and exports its exports. */
function standIn(exports: readonly string[]): string {
  const named = exports.filter((name) => name !== 'default');
  const lines = [
    `import { loadScriptChunk } from "./${LOADER_FILE}";`,
    `const ${CHUNK_BINDING} = loadScriptChunk(import.meta.url);`,
  ];
  if (named.length > 0) lines.push(`export const { ${named.join(', ')} } = ${CHUNK_BINDING};`);
  if (exports.includes('default')) lines.push(`export default ${CHUNK_BINDING}.default;`);
  return `${lines.join('\n')}\n`;
}

/** The own chunks esbuild converts cleanly, by file name in `dir`. */
async function converted(
  esbuild: Esbuild,
  dir: string,
  workingDir: string,
  metafile: Metafile,
  own: ReadonlySet<string>,
): Promise<Map<string, Chunk>> {
  const chunks = new Map<string, Chunk>();
  for (const [output, { imports, exports }] of Object.entries(metafile.outputs)) {
    const file = relative(dir, resolve(workingDir, output));
    if (!own.has(file) || exports.some((name) => name === CHUNK_BINDING || !IDENTIFIER.test(name))) continue;
    try {
      const { code, warnings } = await esbuild.transform(await readFile(join(dir, file), 'utf8'), {
        format: 'cjs',
        loader: 'js',
        platform: 'node',
        target: 'node20',
        charset: 'ascii',
        logLevel: 'silent',
      });
      if (warnings.length === 0) chunks.set(file, { imports, exports, script: code });
    } catch {
      // Left a module: what esbuild cannot express as a script (top-level await) stays as it was.
    }
  }
  return chunks;
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
    format: 'esm',
    platform: 'node',
    target: 'node20',
    charset: 'ascii',
    logLevel: 'silent',
    metafile: true,
  });
  for (const [file, chunk] of chunks) {
    const path = join(dir, file);
    await writeFile(scriptChunkFiles(path).script, chunk.script);
    await writeFile(path, standIn(chunk.exports));
  }
  return Object.keys(loader.metafile.inputs).map((input) => resolve(workingDir, input));
}
