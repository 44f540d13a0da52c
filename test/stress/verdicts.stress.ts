/**
 * The mistakes the testing guide lists, each run under a chaos seed that
 * shifts every call by a few milliseconds (a different seed each stress
 * round): the verdict must be the same on every run, whatever the timing.
 * Run by `npm run test:stress` (not by `npm test`), with every core kept busy.
 */
import { describe, expect, it } from 'vitest';
import { JobFailedError, spawnThreads } from '../../src/index.ts';
import type { scenarios } from '../fixtures/running-ranks.ts';
import { type Launch, type Outcome, scenarioFixture } from '../fixtures/scenarios.ts';

const round = Number(process.env.TENSORCOMM_STRESS_ROUND ?? 1);
const fixture = scenarioFixture<typeof scenarios>(new URL('../fixtures/running-ranks.ts', import.meta.url));
const chaotic =
  (seed: number, faults?: Parameters<typeof spawnThreads>[1]['faults']): Launch =>
  (entry, args) =>
    spawnThreads(entry, {
      worldSize: 2,
      args,
      collectiveTimeoutMs: 20_000,
      chaos: { seed, maxDelayMs: 5 },
      faults,
    });

async function failure(job: Promise<unknown>): Promise<string> {
  const error = await job.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(JobFailedError);
  return (error as Error).message;
}

describe(`stress round ${round}: one verdict for each mistake, whatever the timing`, () => {
  const seeds = [round * 10, round * 10 + 1, round * 10 + 2];

  it.each(seeds)(
    'a call nobody looked at, or a then() on it that throws, fails the rank (chaos seed %i)',
    async (seed) => {
      for (const late of [true, false]) {
        for (const chain of [false, true]) {
          const message = await failure(fixture.run('forgotten', chaotic(seed), { late, chain }));
          expect(message).toMatch(
            chain
              ? /rank 1 \(rank-1\): UnfinishedWorkError: the rank's main returned without looking at 1 call\(s\) it started: the then\(\) chained on allReduce/
              : /rank 1 \(rank-1\): UnfinishedWorkError: the rank's main returned without looking at 1 call\(s\) it started: allReduce/,
          );
        }
        expect(await fixture.run('forgotten', chaotic(seed), { late, detach: true })).toMatchObject([2, {}]);
      }
    },
  );

  it.each(seeds)('an argument error and an injected throw reject at once (chaos seed %i)', async (seed) => {
    const [, bogus] = await fixture.run('refused', chaotic(seed), { bogus: true });
    expect(bogus).toMatchObject({ ok: false, name: 'TypeError' });
    const injected = chaotic(seed, [{ rank: 1, op: 'allReduce', kind: 'throw' }]);
    const [, thrown] = await fixture.run('refused', injected, { bogus: false });
    expect(thrown).toMatchObject({ ok: false, name: 'InjectedFaultError' });
    // The 5 s the telling may take is far off: neither waited for it.
    for (const o of [bogus, thrown]) expect((o as Outcome & { ok: false }).ms).toBeLessThan(1_000);
  });

  it.each(seeds)('a failure nobody observed fails the rank (chaos seed %i)', async (seed) => {
    expect(await failure(fixture.run('unobserved', chaotic(seed)))).toMatch(
      /1 call\(s\) failed and nobody observed it: broadcast on group "world" failed with RangeError/,
    );
  });
});
