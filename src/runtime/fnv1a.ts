/** 32-bit FNV-1a: keys and fingerprints every rank computes alike, without talking. */

/** The standard offset basis, and the FNV prime (a second, independent seed where two hashes are wanted). */
export const FNV_OFFSET_BASIS = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;

/** The hash of `bytes` from `seed`, as an unsigned 32-bit integer. */
export function fnv1a(bytes: Uint8Array, seed: number = FNV_OFFSET_BASIS): number {
  let h = seed;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], FNV_PRIME);
  return h >>> 0;
}
