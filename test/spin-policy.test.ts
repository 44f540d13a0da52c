import { describe, expect, it } from 'vitest';
import { SpinPolicy, YIELD_AFTER_MS } from '../src/runtime/spin-policy.ts';

/** A policy on a clock that moves `stepMs` at every reading, counting its yields. */
function fakePolicy(stepMs: number) {
  let now = 0;
  const yields: number[] = [];
  const policy = new SpinPolicy(true, {
    now: () => {
      now += stepMs;
      return now;
    },
    yieldCore: () => yields.push(now),
  });
  return { policy, yields };
}

describe('SpinPolicy', () => {
  it('spins until the look finds it, without yielding the core in its first moments', () => {
    const { policy, yields } = fakePolicy(YIELD_AFTER_MS / 10);
    let looks = 0;
    expect(policy.spin(() => ++looks === 5, 1)).toBe(true);
    expect(looks).toBe(5);
    expect(yields).toEqual([]);
  });

  it('hands the core over between looks once the spin has lasted a moment, and gives up at its budget', () => {
    const step = YIELD_AFTER_MS / 4;
    const { policy, yields } = fakePolicy(step);
    let looks = 0;
    expect(
      policy.spin(() => {
        looks++;
        return false;
      }, 1),
    ).toBe(false);
    // One clock reading per look after the first reading; the budget ends the spin.
    expect(looks).toBeCloseTo(1 / step, -1);
    expect(yields.length).toBeGreaterThan(0);
    expect(Math.min(...yields)).toBeGreaterThanOrEqual(YIELD_AFTER_MS);
    expect(yields.length).toBeLessThan(looks);
  });

  it('stops spinning after misses in a row, retries now and then, and spins again once one catches', () => {
    const { policy } = fakePolicy(0.5);
    const miss = () => false;
    for (let i = 0; i < 4; i++) {
      expect(policy.pays()).toBe(true);
      policy.spin(miss, 1);
    }
    const pays = Array.from({ length: 64 }, () => policy.pays());
    expect(pays.filter(Boolean)).toHaveLength(1);
    expect(pays[63]).toBe(true);
    expect(policy.spin(() => true, 1)).toBe(true);
    expect(policy.pays()).toBe(true);
  });

  it('never spins where it is not enabled', () => {
    const policy = new SpinPolicy(false);
    expect(Array.from({ length: 200 }, () => policy.pays()).some(Boolean)).toBe(false);
  });
});
