/**
 * Dynamic import for the library's own code. In a rank thread the library
 * may run as script chunks compiled from a V8 code cache
 * (launch/script-chunk-loader.ts), and a function that comes from a code
 * cache loses the host options that `import()` needs (Node 20 then throws
 * ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING). The loader registers an importer
 * of its own, an ES module's, under IMPORTER; elsewhere this is `import()`.
 * Library code imports dynamically only through here: test/script-chunks.test.ts
 * holds it to that. Specifiers must be absolute URLs, since no importer's
 * location is the caller's.
 */
export const IMPORTER = Symbol.for('tensorcomm.importModule');

export type Importer = (specifier: string) => Promise<unknown>;

export function importModule<T>(url: string): Promise<T> {
  const importer = (globalThis as { [IMPORTER]?: Importer })[IMPORTER];
  return (importer === undefined ? import(url) : importer(url)) as Promise<T>;
}
