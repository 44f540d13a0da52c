/** WeightSyncEngine between rank threads: bit-exact delivery, buffer reuse, ownership, striping and failures. */
import { beforeAll, describe, expect, it } from 'vitest';
import { JobFailedError, spawnThreads } from '../src/index.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';
import type { DeliverConfig, scenarios } from './fixtures/weight-sync.ts';
import { MODEL_SIZE, testModel } from './fixtures/weight-sync-model.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/weight-sync.ts', import.meta.url));
// biome-ignore lint/suspicious/noExplicitAny: each scenario returns its own record shape
type Result = any;

const CONFIGS: DeliverConfig[] = [
  { senders: 1, receivers: 1 },
  { senders: 1, receivers: 3, borrow: true },
  { senders: 2, receivers: 1, phase: 1 },
  { senders: 2, receivers: 3 },
  { senders: 3, receivers: 3, phase: 2 },
  { senders: 3, receivers: 1 },
  { senders: 3, receivers: 3, phase: 5, borrow: true },
  // Packed buckets, as between processes: the same results.
  { senders: 2, receivers: 3, lend: false },
  { senders: 3, receivers: 1, phase: 2, borrow: true, lend: false },
];

/**
 * deliver, errors and fail-fast run in one job of 6 ranks, one after the
 * other: errors on a group of its first 4 ranks, fail-fast of its first 5 (the
 * others sit them out, returning null), each group with streams of its own.
 */
let shared: Record<'deliver' | 'errors' | 'fail-fast', Result[]>;
beforeAll(async () => {
  shared = await fixture.runSteps(
    [
      { scenario: 'deliver', args: { configs: CONFIGS } },
      { scenario: 'errors', args: { members: 4 } },
      { scenario: 'fail-fast', args: { members: 5 } },
    ],
    (entry, args) => spawnThreads(entry, { worldSize: 6, args }),
  );
}, 240_000);

describe('WeightSyncEngine between threads', () => {
  it('delivers a mixed-dtype model bit-exact for S ∈ {1,2,3}, R ∈ {1,3}, several phases, three syncs each', () => {
    const res = shared.deliver;
    const names = testModel(1).map(([n]) => n);
    CONFIGS.forEach((config, k) => {
      for (let i = 0; i < config.receivers; i++) {
        const got = res[3 + i].deliver[k];
        expect(got.role, `config ${k} receiver ${i}`).toBe('receiver');
        expect(got.names).toEqual(names);
        expect(got.problems, `config ${JSON.stringify(config)}, receiver ${i}`).toEqual([]);
      }
      for (let s = 0; s < config.senders; s++) expect(res[s].deliver[k]).toEqual({ role: 'sender' });
    });
    expect(names).toHaveLength(MODEL_SIZE);

    // A receiver that leaves after 3 tensors: the rest is drained and the next sync is exact.
    expect(res[0].breakEarly).toBe('sent');
    for (const r of [3, 4]) expect(res[r].breakEarly).toEqual({ first: 3, second: [] });

    // Between threads senders lend their tensors (a borrowed one is the sender's memory) unless told not to.
    expect(res[0].lending).toEqual({
      lent: 'the receiver saw the sender’s tensor',
      packed: 'the receiver saw a copy',
    });
    expect(res[3].lending).toEqual({ lent: 'written', packed: 'written' });

    expect(res[0].validation).toEqual([
      expect.stringMatching(/group must be a ThreadGroup/),
      expect.stringMatching(/senders must be a non-empty array/),
      expect.stringMatching(/senders contains 9, which is not a rank of a group of size 6/),
      expect.stringMatching(/receivers \[1, 1\] repeats a rank/),
      expect.stringMatching(/group rank 0 is both a sender and a receiver/),
      expect.stringMatching(/bucketBytes must be a positive multiple of 16 .* got 1000/),
      expect.stringMatching(/bucketBytes must be .* got 0/),
      expect.stringMatching(/phase must be a positive integer, got 0/),
      expect.stringMatching(/timeoutMs must be a positive number/),
      expect.stringMatching(/lend must be a boolean, got/),
      expect.stringMatching(/group rank 0 is neither a sender \(1\) nor a receiver \(2\)/),
    ]);
  });

  it('fails on every rank, naming the problem, for diverging streams, a malformed header, differing lend options and silent peers', () => {
    const res = shared.errors.slice(0, 4);
    expect(shared.errors.slice(4)).toEqual([null, null]);
    for (const r of res) {
      expect(r.mismatchMiddle.error).toMatch(/senders iterated different weight streams/);
      expect(r.mismatchLast.error).toMatch(/senders iterated different weight streams/);
      expect(r.mismatchMiddle.ms).toBeLessThan(10_000);
    }
    for (const r of [2, 3]) {
      expect(res[r].malformed.error).toMatch(
        /WeightSyncHeaderError: .*bucket 0 from sender 0: malformed weight-sync header: bad magic/,
      );
    }
    expect(res[0].malformed).toEqual([
      { ok: false, error: expect.stringMatching(/bad magic/) },
      { ok: false, error: expect.stringMatching(/bad magic/) },
    ]);
    for (const r of [2, 3]) {
      expect(res[r].lentMismatch.error).toMatch(/bucket 0 from sender 0 lent 1 views for its 2 entries/);
    }
    expect(res[0].lentMismatch).toEqual([
      { ok: false, error: expect.stringMatching(/lent 1 views for its 2 entries/) },
      { ok: false, error: expect.stringMatching(/lent 1 views for its 2 entries/) },
    ]);
    for (const r of [0, 2, 3]) {
      expect(res[r].lendDiffers.error).toMatch(/the ranks were given different lend options/);
      expect(res[r].lendDiffers.ms).toBeLessThan(1500);
    }
    expect(res[0].silent.error).toMatch(/bucket 0: .*timed out after 1500 ms/);
    expect(res[3].silent.error).toMatch(/timed out after 1500 ms/);
  });

  it('a sender whose weights iterator throws, or whose stream is one tensor longer, fails every rank at once', () => {
    // Every wait of these syncs may take 20 s: an error that came by a timeout takes that long.
    const res = shared['fail-fast'].slice(0, 5);
    expect(shared['fail-fast'].slice(5)).toEqual([null]);
    const senders = [0, 1, 2];
    const receiverError =
      /^WeightSyncError: WeightSyncEngine\.send: receiver [34] failed: WeightSyncEngine\.receive: /;
    const expectations: Record<string, { culprit: number; own: RegExp; problem: RegExp }> = {
      throwsMidStream: {
        culprit: 1,
        own: /^Error: producing layer\.1\.weight failed$/,
        problem: /sender 1 failed: Error: producing layer\.1\.weight failed$/,
      },
      throwsAtStart: {
        culprit: 0,
        own: /^Error: no weights yet$/,
        problem: /sender 0 failed: Error: no weights yet$/,
      },
      throwsWhileOthersRunAhead: {
        culprit: 1,
        own: /^Error: out of memory at w\.20$/,
        problem: /sender 1 failed: Error: out of memory at w\.20$/,
      },
      longerInLastBucket: {
        culprit: -1,
        own: /never a culprit/,
        problem:
          /sender 2 planned 5 buckets \(20 tensors, .*\), but 5 buckets \(19 tensors, .*\) arrived: sender 2's stream is longer$/,
      },
      longerByABucket: {
        culprit: -1,
        own: /never a culprit/,
        problem:
          /sender 2 sent another bucket \(first entry 'extra'\) after bucket 4, .*: sender 2's stream is longer than the 5 buckets/,
      },
      longerOnSender1: {
        culprit: -1,
        own: /never a culprit/,
        problem:
          /of different lengths: sender 2's stream ended after 5 buckets \(19 tensors\), but sender 1 sent bucket 4 as not the last: sender 2's stream is shorter than sender 1's$/,
      },
    };
    for (const [name, { culprit, own, problem }] of Object.entries(expectations)) {
      res.forEach((r, rank) => {
        const { error, ms } = r[name];
        const where = `${name}, rank ${rank}: ${error}`;
        expect(ms, where).toBeLessThan(8000);
        if (rank === culprit) {
          expect(error, where).toMatch(own); // the failed sender's own error, unchanged
          return;
        }
        // Receivers name the problem; the other senders name the receiver that reported it, and its words.
        expect(error, where).toMatch(
          senders.includes(rank) ? receiverError : /^WeightSyncError: WeightSyncEngine\.receive: /,
        );
        expect(error, where).toMatch(problem);
      });
    }
  });

  it('a receiver that dies fails the senders at once, naming it', async () => {
    const started = performance.now();
    const error = await fixture
      .run('receiver-dies', (entry, args) => spawnThreads(entry, { worldSize: 3, args }))
      .catch((e) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const failed = (error as JobFailedError).failures.map((f) => f.rank);
    expect(failed).toContain(2);
    expect(failed).toContain(0);
    expect(String((error as JobFailedError).failures.find((f) => f.rank === 0)?.error.message)).toMatch(
      /rank 2/,
    );
    // The engine's timeout is 60 s: the failure arrived through the job, not by waiting it out.
    expect(performance.now() - started).toBeLessThan(20_000);
  }, 60_000);
});
