/**
 * What DESIGN's "Running ranks" promises about a rank's start and end:
 * unknown options are refused, Tensors cross to and from ranks whole, and a
 * rank whose main returns with a call pending, or after a failure nobody
 * looked at, fails naming the call.
 */
import { describe, expect, it } from 'vitest';
import { JobFailedError, launchProcesses, spawnThreads, Tensor } from '../src/index.ts';
import type { scenarios } from './fixtures/running-ranks.ts';
import { type Launch, type Outcome, scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/running-ranks.ts', import.meta.url));
const threads: Launch = (entry, args) =>
  spawnThreads(entry, { worldSize: 2, args, collectiveTimeoutMs: 20_000 });
const processes: Launch = (entry, args) =>
  launchProcesses(entry, { nproc: 2, args, collectiveTimeoutMs: 20_000, output: () => {} });

async function jobError(job: Promise<unknown>): Promise<JobFailedError> {
  const error = await job.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(JobFailedError);
  return error as JobFailedError;
}

describe('options', () => {
  it('an unknown option key is a TypeError naming it, and the key it is close to', async () => {
    const entry = fixture.entry;
    // @ts-expect-error: the misspelling a user makes
    await expect(spawnThreads(entry, { worldSize: 2, wordSize: 2 })).rejects.toThrow(
      /spawnThreads: unknown option "wordSize" \(did you mean "worldSize"\?\)/,
    );
    await expect(spawnThreads(entry, { worldSize: 2, bogus: 1 } as never)).rejects.toThrow(TypeError);
    // @ts-expect-error: torchrun's spelling
    await expect(launchProcesses(entry, { nproc: 2, nprocPerNode: 2 })).rejects.toThrow(
      /launchProcesses: unknown option "nprocPerNode"; known options: .*nproc/,
    );
  });
});

describe.each([
  ['threads', threads],
  ['processes', processes],
])('ranks as %s', (_, launch) => {
  it('Tensors in args and results cross whole, nested, shared and strided', async () => {
    const args = { scale: Tensor.fromArray([2], [1], 'float32'), list: [Tensor.zeros([1])] };
    const { tensors, observed, collective, unclonable } = await fixture.runSteps(
      ['tensors', 'observed', 'collective', 'unclonable'],
      launch,
      args,
    );
    for (const r of tensors) {
      expect(r.argsArrived).toBe(true);
      expect(r.scaled).toBeInstanceOf(Tensor);
      expect(r.scaled.toArray()).toEqual([6, 40]);
      expect(r.nested.list[0].toArray()).toEqual([0, 1, 2]);
      expect(r.nested.map.get('half')?.dtype).toBe('float16');
      expect(r.nested.map.get('half')?.toArray()).toEqual([0.5, 0.5]);
      expect(r.view.shape).toEqual([3, 2]);
      expect(r.view.toArray()).toEqual([0, 3, 1, 4, 2, 5]);
      expect(r.twice[0]).toBe(r.twice[1]);
    }
    expect(tensors[1].nested.list[1].toArray()).toEqual([1]);
    expect(observed.map((r) => r.refused)).toEqual(['RangeError', 'RangeError']);
    expect(observed.map((r) => r.polledFailed)).toEqual([true, true]);
    expect(collective).toEqual(['function', 'function']);
    for (const { broadcast, allGather } of unclonable) {
      expect(broadcast).toMatchObject({
        ok: false,
        message: expect.stringMatching(/broadcastObject: the object cannot be structured-cloned/),
      });
      expect(allGather).toMatchObject({
        ok: false,
        message: expect.stringMatching(/allGatherObject: the object cannot be structured-cloned/),
      });
      // Far below the 20 s collective timeout: the peers were told.
      expect(Math.max(broadcast.ok ? 0 : broadcast.ms, allGather.ok ? 0 : allGather.ms)).toBeLessThan(5_000);
    }
  });

  it('a rank that returns without looking at a pending call fails naming the call and its site; its peer at once', async () => {
    const started = Date.now();
    const error = await jobError(fixture.run('pending', launch));
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(error.message).toMatch(
      /rank 0 \(rank-0\): UnfinishedWorkError: the rank's main returned without looking at 1 call\(s\) it started: allReduce\(float32\[4\], sum\) #0 on group "world" \(called at .*running-ranks\.ts:\d+:\d+/,
    );
    // Its peer is not left waiting: it fails naming rank 0, or (a small allReduce meets in the group's
    // shared region, where rank 0's contribution arrived before it returned) it completes the call.
    const peer = error.failures.find((f) => f.rank === 1);
    // Arriving after rank 0 left, it fails naming rank 0: as a lost rank, or with the error rank 0 left in the region.
    if (peer) {
      expect(`${peer.error.name}: ${peer.error.message}`).toMatch(/^RankFailedError: .*rank 0/);
    }
    const p2p = await jobError(fixture.run('p2pPending', launch));
    expect(p2p.message).toMatch(
      /rank 1 \(rank-1\): UnfinishedWorkError: the rank's main returned without looking at 1 call\(s\) it started: recv on collective group "pair";/,
    );
  });

  it('a call nobody looked at fails its rank whether it completed as it was made or not; detach() lets it go', async () => {
    const forgotten = "the rank's main returned without looking at 1 call\\(s\\) it started:";
    for (const late of [true, false]) {
      // The timing each run is meant to have: rank 1's call completed at once when it arrived late.
      const detached = await fixture.run('forgotten', launch, { late, detach: true });
      // Process ranks' small calls too meet in a shared region, where a late arrival completes the call.
      expect(detached).toEqual([2, { completedAtOnce: late }]);
      const plain = await jobError(fixture.run('forgotten', launch, { late }));
      expect(plain.message).toMatch(
        new RegExp(
          `rank 1 \\(rank-1\\): UnfinishedWorkError: ${forgotten} allReduce\\(float32\\[4\\], sum\\) #0 on group "world"`,
        ),
      );
      const chained = await jobError(fixture.run('forgotten', launch, { late, chain: true }));
      expect(chained.message).toMatch(
        new RegExp(
          `rank 1 \\(rank-1\\): UnfinishedWorkError: ${forgotten} the then\\(\\) chained on allReduce\\(float32\\[4\\], sum\\) #0`,
        ),
      );
    }
  });

  it('a call that fails its own checks rejects at once, its peers told in the background', async () => {
    const [other, refused] = await fixture.run('refused', launch, { bogus: true });
    expect(other).toBe('other');
    expect(refused).toMatchObject({
      ok: false,
      name: 'TypeError',
      message: expect.stringMatching(/unknown reduce op "bogus"/),
    });
    // Far below the 5 s the telling may take: the call did not wait for it.
    expect((refused as Outcome & { ok: false }).ms).toBeLessThan(1_000);
  });

  it('a failure nobody observed fails its rank, also a throw inside an unawaited then()', async () => {
    const unobserved = await jobError(fixture.run('unobserved', launch));
    expect(unobserved.message).toMatch(
      /rank [01] \(rank-[01]\): UnfinishedWorkError: 1 call\(s\) failed and nobody observed it: broadcast on group "world" failed with RangeError: broadcast: src 99 is not a rank of group "world"/,
    );
    const thenThrows = await jobError(fixture.run('thenThrows', launch));
    expect(thenThrows.message).toMatch(
      /without looking at 1 call\(s\) it started: the then\(\) chained on barrier\(\) #0 on group "world".* \(failed with Error: rank [01] oops\)/,
    );
  });
});

it('an entry that imports nothing still gets ctx.collective', async () => {
  const results = await spawnThreads(new URL('./fixtures/running-ranks-bare.mjs', import.meta.url), {
    worldSize: 2,
  });
  expect(results).toEqual(['function', { hello: 'rank-0' }]);
});
