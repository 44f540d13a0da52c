import { beforeAll, describe, expect, it } from 'vitest';
import type { scenarios } from './fixtures/debug-mismatch.ts';
import { MEDIA } from './fixtures/media.ts';
import { type Outcome, scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/debug-mismatch.ts', import.meta.url));
/** A long collective timeout: every failure below must come from a check, far sooner. */
const TIMEOUT_MS = 20_000;
const FAST_MS = 5_000;
/** A hook that runs one job of several scenarios gets the time of the tests it stands for (60 s each by default). */
const SHARED_JOB_MS = 180_000;

type Failed = Extract<Outcome, { ok: false }>;

function expectFailedFast(outcomes: Outcome[], ranks: number[], pattern: RegExp, name: string): Failed[] {
  return ranks.map((rank) => {
    const o = outcomes[rank];
    expect(o.ok, `rank ${rank} should fail`).toBe(false);
    const failed = o as Failed;
    expect(failed.message, `rank ${rank}`).toMatch(pattern);
    expect(failed.name, `rank ${rank}`).toBe(name);
    expect(failed.ms, `rank ${rank} took too long`).toBeLessThan(FAST_MS);
    return failed;
  });
}

/** The format: `rank a called X as call #n on group "world", but rank b called Y as call #n`. */
function mismatch(mine: string, theirs: string, seq = 0): RegExp {
  const esc = (s: string) => s.replace(/[()[\]]/g, (c) => `\\${c}`);
  const call = `#${seq}`;
  return new RegExp(
    `rank \\d called (${esc(mine)}|${esc(theirs)}) as call ${call} on group "world", but rank \\d called ` +
      `(${esc(mine)}|${esc(theirs)}) as call ${call}`,
  );
}

const cases = [
  ['op', 'allReduce(float32[8], sum)', 'allGather(float32[8])'],
  ['shape', 'allReduce(float32[4,8], sum)', 'allReduce(float32[4,9], sum)'],
  ['dtype', 'allReduce(float32[4,8], sum)', 'allReduce(int32[4,8], sum)'],
  ['reduce-op', 'allReduce(int32[4], sum)', 'allReduce(int32[4], max)'],
  ['root-broadcast', 'broadcast(float32[4], src=0)', 'broadcast(float32[4], src=1)'],
  ['root-scatter', 'scatter(float32[4], src=0)', 'scatter(float32[4], src=1)'],
  ['root-reduce', 'reduce(float32[4], dst=0, sum)', 'reduce(float32[4], dst=1, sum)'],
  ['root-gather', 'gather(float32[4], dst=0)', 'gather(float32[4], dst=1)'],
  ['order', 'allReduce(float32[4], sum)', 'broadcast(float32[4], src=0)'],
] as const;
/**
 * One job per medium runs every scenario, in this order, on the same three
 * ranks: a reported mismatch leaves the group usable. Each case makes one
 * world collective on every rank, so case k is call #k; p2p-size's send and
 * recv take no call number; `missing`, where a rank leaves its main
 * function, comes last, as call #9.
 */
const steps = [...cases.map(([scenario]) => scenario), 'p2p-size', 'missing'] as const;

describe.each(MEDIA)('in %s', (_medium, launch) => {
  let outcomes: Awaited<ReturnType<typeof runAll>>;
  const runAll = () =>
    fixture.runSteps(steps, (entry, args) => launch(entry, 3, { args, collectiveTimeoutMs: TIMEOUT_MS }));
  beforeAll(async () => {
    outcomes = await runAll();
  }, SHARED_JOB_MS);

  describe('every kind of disagreement fails every rank at once', () => {
    for (const [seq, [scenario, mine, theirs]] of cases.entries()) {
      it(scenario, () => {
        const failed = expectFailedFast(
          outcomes[scenario],
          [0, 1, 2],
          mismatch(mine, theirs, seq),
          'CollectiveMismatchError',
        );
        const all = failed.map((f) => f.message).join('\n');
        expect(all).toContain(theirs);
        // The odd rank out names itself and a peer, with both call sites in user code (tensorcomm's frames stripped).
        expect(failed[2].message).toMatch(/rank 2 called it at .*debug-mismatch\.ts:\d+:\d+/);
        expect(failed[2].message).toMatch(/rank [01] called it at .*debug-mismatch\.ts:\d+:\d+/);
        expect(all).not.toMatch(/src[/\\](thread-group|debug|runtime)[/\\]/);
      });
    }

    it('a missing rank: the ranks waiting on it name it and the call', () => {
      expect(outcomes.missing[2].ok).toBe(true);
      expectFailedFast(
        outcomes.missing,
        [0, 1],
        /broadcast\(float32\[4\], src=0\) call #9 on group "world": rank [01] waited for rank 2, which will never make this call: it left its main function/,
        'RankFailedError',
      );
    });

    it('point-to-point size: both ends fail', () => {
      const p2p = outcomes['p2p-size'];
      expectFailedFast(
        p2p,
        [0, 1],
        /rank 1 expects float32\[3\] from rank 0, which sent float32\[4\]/,
        'CollectiveMismatchError',
      );
      for (const o of p2p.slice(0, 2) as Failed[]) {
        expect(o.message).toMatch(/rank 0 called it at .*debug-mismatch\.ts:\d+/);
        expect(o.message).toMatch(/rank 1 called it at .*debug-mismatch\.ts:\d+/);
      }
    });
  });
});
