/** A rank's virtual clock on its own: compute, waits split into straggler wait and exposed time, the call limit. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../src/index.ts';
import { RankClock } from '../../src/predict/rank-clock.ts';

const topology = loadTopology('h100-nvlink');
const call = (startUs: number, endUs: number) => ({
  group: 'world',
  seq: 0,
  op: 'allReduce',
  bytes: 8,
  algorithm: 'ring',
  protocol: 'LL',
  startUs,
  endUs,
  busbwGBps: 1,
});

describe('RankClock', () => {
  it('moves only by declared compute and waits on calls ending ahead of it', () => {
    const clock = new RankClock(3, topology);
    clock.compute(100);
    expect(clock.now()).toBe(100);
    // Started at 250 (a straggler), ended at 300: 150 waited for the straggler, 50 exposed.
    clock.record(call(250, 300));
    clock.waitFor({ startUs: 250, endUs: 300 });
    // A call that ended before the clock got there costs nothing.
    clock.record(call(120, 180));
    clock.waitFor({ startUs: 120, endUs: 180 });
    // Started before the clock, ended after: all of the rest is exposed.
    clock.compute(20);
    clock.record(call(310, 400));
    clock.waitFor({ startUs: 310, endUs: 400 });
    expect(clock.totals()).toEqual({
      rank: 3,
      endUs: 400,
      computeUs: 120,
      commUs: 50 + 60 + 90,
      exposedCommUs: 50 + 80,
      waitUs: 150,
    });
    expect(clock.calls().map((c) => c.rank)).toEqual([3, 3, 3]);
  });

  it('refuses compute that is not a finite number ≥ 0', () => {
    const clock = new RankClock(0, topology);
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, '5' as unknown as number]) {
      expect(() => clock.compute(bad)).toThrow(RangeError);
    }
    expect(clock.now()).toBe(0);
  });

  it('lists calls up to its limit and counts the rest, its totals exact', () => {
    const clock = new RankClock(0, topology, 2);
    for (let i = 0; i < 5; i++) clock.record(call(i, i + 1));
    expect(clock.calls()).toHaveLength(2);
    expect(clock.totals()).toMatchObject({ commUs: 5, droppedCalls: 3 });
  });
});
