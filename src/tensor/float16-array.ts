/**
 * The runtime's own Float16Array (Node 24 and later), or undefined before it.
 * Where there is one, float16 words are converted by the engine: a store
 * rounds a double to the nearest float16, ties to even, as half.ts does by
 * hand about ten times slower, and typed-array copies convert whole ranges.
 * Typed as Float32Array's constructor: what the library uses of it (element
 * reads and writes, set, subarray) behaves the same, 2-byte elements apart.
 */
export const RuntimeFloat16Array = (globalThis as { Float16Array?: Float32ArrayConstructor }).Float16Array;
