/**
 * koffi, loaded on first use. Its native module costs each thread that loads
 * it start-up time and memory; a rank thread that never calls C (no GPU, no
 * file store, small calls whose ranks keep pace) need not pay that, and a job
 * of many such threads starts that much sooner.
 */
import { createRequire } from 'node:module';
import type { TypeObject } from 'koffi';

export type Koffi = typeof import('koffi');

let loaded: Koffi | undefined;

export function koffi(): Koffi {
  loaded ??= createRequire(import.meta.url)('koffi') as Koffi;
  return loaded;
}

/** The file `koffi()` loads, for a thread that loads koffi of its own (file-store/copy-helper.ts). */
export function koffiEntry(): string {
  return createRequire(import.meta.url).resolve('koffi');
}

/** A koffi type (a struct passed by value, say), made on first use. */
export function koffiType(make: (k: Koffi) => TypeObject): () => TypeObject {
  let type: TypeObject | undefined;
  return () => {
    type ??= make(koffi());
    return type;
  };
}
