/**
 * What a rank thread's code says to the script-chunk loader (script-chunk-loader.ts)
 * when one loaded its library: the loader is a file of its own in the bundle,
 * not a module the library's chunks share, so they meet through a global.
 */
export const CODE_CACHES = Symbol.for('tensorcomm.codeCaches');

export interface CodeCaches {
  /** Writes the V8 code cache of every script chunk this thread compiled without a usable one. */
  save(): void;
  /** The script chunks this thread loaded (file URLs), and whether each came from its code cache. */
  loaded(): { chunk: string; fromCache: boolean }[];
}

/**
 * Saves the code caches of this thread's script chunks, once a job has run
 * (so they hold what its calls compiled, not only the chunks' top level);
 * does nothing where the library was not loaded as script chunks.
 */
export function saveCodeCaches(): void {
  (globalThis as { [CODE_CACHES]?: CodeCaches })[CODE_CACHES]?.save();
}
