/**
 * A spin of waitBriefly gives its core away past setSpinBudget's yieldAfterMs
 * (process ranks: a peer rung through its doorbell is woken on the spinner's
 * core) and never where none is given (thread ranks). libc's sched_yield is
 * counted instead of called.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';

const yields = vi.hoisted(() => ({ count: 0 }));
vi.mock('../src/runtime/libc.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/runtime/libc.ts')>();
  return {
    ...real,
    schedYield: () => () => {
      yields.count++;
      return 0;
    },
  };
});

const { setSpinBudget, waitBriefly } = await import('../src/runtime/wait.ts');

/** A spin of `spinMs` on a word nobody sets; how many times it gave its core away. */
function yieldsInSpin(spinMs: number, yieldAfterMs?: number): number {
  setSpinBudget(1, spinMs, yieldAfterMs);
  const words = new Int32Array(new SharedArrayBuffer(4));
  yields.count = 0;
  const started = performance.now();
  expect(waitBriefly(words, 0, (v) => v === 1, started + 10_000, undefined)).toBe(false);
  expect(performance.now() - started).toBeGreaterThanOrEqual(spinMs);
  return yields.count;
}

describe('a spin that gives its core away', () => {
  afterEach(() => setSpinBudget(1));

  it('yields between looks past yieldAfterMs, and spins its whole budget', () => {
    expect(yieldsInSpin(2, 0.03)).toBeGreaterThan(0);
  });

  it('never yields before yieldAfterMs, nor without it', () => {
    expect(yieldsInSpin(2, 5)).toBe(0);
    expect(yieldsInSpin(2)).toBe(0);
  });
});
