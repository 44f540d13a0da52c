/**
 * SiteBudget (src/debug/call-site.ts) on a simulated clock: what a job's
 * slow first captures cost it, and what a hot loop of tiny calls spends.
 */
import { describe, expect, it } from 'vitest';
import { type CapturedSite, SiteBudget } from '../src/debug/call-site.ts';

/** A clock the test moves, and captures that each take `costMs` of it. */
function simulated(costMs: number) {
  let now = 0;
  let spentMs = 0;
  const budget = new SiteBudget({
    now: () => now,
    capture: (): CapturedSite => {
      now += costMs;
      spentMs += costMs;
      return { stack: 'Error\n    at user (file:///job.ts:1:1)' };
    },
  });
  return {
    budget,
    advance: (ms: number) => {
      now += ms;
    },
    get now() {
      return now;
    },
    get spentMs() {
      return spentMs;
    },
  };
}

describe('SiteBudget', () => {
  it("gives a job's first calls their sites even when each capture is slow (cold code, a loaded machine)", () => {
    // A capture that took a whole millisecond of wall time: a new call path, or the thread descheduled.
    const job = simulated(1);
    const sites = Array.from({ length: 60 }, () => job.budget.capture());
    expect(sites.filter((s) => s === undefined)).toHaveLength(0);
  });

  it('keeps a hot loop of tiny calls within its share of the time, and calls made apart still get a site', () => {
    const job = simulated(0.02);
    let captured = 0;
    for (let call = 0; call < 200_000; call++) {
      job.advance(0.001);
      if (job.budget.capture()) captured++;
    }
    expect(captured).toBeLessThan(200_000);
    // Share of 0.5% of the elapsed time, plus the credit the bucket starts with.
    expect(job.spentMs).toBeLessThanOrEqual(0.005 * job.now + 2 + 0.02);
    job.advance(5);
    for (let call = 0; call < 100; call++) {
      job.advance(5);
      expect(job.budget.capture()).toBeDefined();
    }
  });
});
