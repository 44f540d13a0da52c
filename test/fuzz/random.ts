/** The fuzz's seeded chance: the library's mulberry32 and the few draws every target and mutator makes. */
export { mulberry32 } from '../../src/runtime/mulberry32.ts';

export type Rnd = () => number;

/** An integer in [0, n). */
export const int = (rnd: Rnd, n: number): number => Math.floor(rnd() * n);

export const pick = <T>(rnd: Rnd, items: readonly T[]): T => items[int(rnd, items.length)];

export function randomBytes(rnd: Rnd, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = int(rnd, 256);
  return bytes;
}
