/**
 * The running stream digest: FNV-1a (32 bit) over each bucket header's bytes
 * with its travel fields (sync, digest, delta) zeroed, seeded by the previous bucket's digest. Every
 * sender computes it over the whole stream (also the buckets other senders
 * send); a receiver recomputes it from the headers it actually got. A sender
 * that iterated a different stream (names, dtypes, shapes, order, chunking)
 * therefore carries a different digest in its next header.
 */
import { DIGEST_OFFSET, TRAVEL_FIELDS } from './header.ts';

export const DIGEST_SEED = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

function fnv1a(seed: number, bytes: Uint8Array, skipFrom: number, skipTo: number): number {
  let h = seed >>> 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = i >= skipFrom && i < skipTo ? 0 : bytes[i];
    h = Math.imul(h ^ b, FNV_PRIME) >>> 0;
  }
  return h;
}

/** The digest after the header `bytes`, given the digest before it (the travel fields are read as zero). */
export function chainDigest(previous: number, bytes: Uint8Array): number {
  return fnv1a(previous, bytes, TRAVEL_FIELDS.from, TRAVEL_FIELDS.to);
}

/** Writes the chained digest into an encoded header (sender side) and returns it. */
export function stampDigest(previous: number, bytes: Uint8Array): number {
  const digest = chainDigest(previous, bytes);
  new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setUint32(DIGEST_OFFSET, digest, true);
  return digest;
}

export function hex(digest: number): string {
  return `0x${(digest >>> 0).toString(16).padStart(8, '0')}`;
}
