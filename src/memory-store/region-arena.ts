/**
 * RegionArena: memory every thread of a job maps, handed out in regions by
 * key (a thread group's id), for collectives whose ranks meet in one shared
 * region instead of the keyed slot table. The first rank to ask for a key
 * carves its region; every later caller of that key gets the same bytes, so
 * the ranks of a group agree without talking. Regions are never freed: the
 * arena lives as long as the job, and once it is full a new key gets
 * undefined (recorded, so every member of that group gets undefined too).
 * The arena is allocated whole but only the regions in use are ever touched,
 * so the OS backs only those pages.
 */
import { MAX_KEY_BYTES } from '../runtime/store-limits.ts';
import type { SharedRegion } from '../runtime/tensor-store.ts';

const MAX_REGIONS = 256;
/** Per directory entry: hash, key length, byte offset (NO_ROOM when the arena was full), byte length; then the key. */
const ENTRY_WORDS = 4 + MAX_KEY_BYTES / 4;
const HEADER_WORDS = 4; // [regions, next free byte]
const DIRECTORY_BYTES = (HEADER_WORDS + MAX_REGIONS * ENTRY_WORDS) * 4;
const NO_ROOM = -1;
/** Regions start on a cache line: their words are what ranks spin and park on. */
export const REGION_ALIGN = 64;
export const DEFAULT_ARENA_BYTES = 64 << 20;

/**
 * An arena of `bytes`, or of the default size where the system refuses to
 * reserve that much (no overcommit): groups that then find no room serve
 * their calls through the keyed store, slower but whole.
 */
export function createArena(bytes = DEFAULT_ARENA_BYTES): SharedArrayBuffer {
  let buffer: SharedArrayBuffer;
  try {
    buffer = new SharedArrayBuffer(DIRECTORY_BYTES + bytes);
  } catch (error) {
    if (!(error instanceof RangeError) || bytes <= DEFAULT_ARENA_BYTES) throw error;
    buffer = new SharedArrayBuffer(DIRECTORY_BYTES + DEFAULT_ARENA_BYTES);
  }
  new Int32Array(buffer)[1] = DIRECTORY_BYTES;
  return buffer;
}

/** The region of `key` (allocating `bytes` of it on first use); call with the store's lock held. */
export function regionOf(
  arena: SharedArrayBuffer,
  keyBytes: Uint8Array,
  hash: number,
  bytes: number,
): SharedRegion | undefined {
  const words = new Int32Array(arena);
  const keys = new Uint8Array(arena);
  const count = words[0];
  for (let e = 0; e < count; e++) {
    const at = HEADER_WORDS + e * ENTRY_WORDS;
    if (words[at] !== hash || words[at + 1] !== keyBytes.length) continue;
    const keyAt = (at + 4) * 4;
    if (!keyBytes.every((b, i) => keys[keyAt + i] === b)) continue;
    // A caller asking for more than the first one carved is a member disagreeing about the group's size.
    return words[at + 2] === NO_ROOM || words[at + 3] < bytes
      ? undefined
      : { buffer: arena, byteOffset: words[at + 2], byteLength: words[at + 3] };
  }
  if (count === MAX_REGIONS) return undefined;
  const at = HEADER_WORDS + count * ENTRY_WORDS;
  const offset = Math.ceil(words[1] / REGION_ALIGN) * REGION_ALIGN;
  const fits = offset + bytes <= arena.byteLength;
  words[at] = hash;
  words[at + 1] = keyBytes.length;
  words[at + 2] = fits ? offset : NO_ROOM;
  words[at + 3] = bytes;
  keys.set(keyBytes, (at + 4) * 4);
  words[0] = count + 1;
  if (!fits) return undefined;
  words[1] = offset + bytes;
  return { buffer: arena, byteOffset: offset, byteLength: bytes };
}
