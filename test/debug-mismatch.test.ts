import { describe, expect, it } from 'vitest';
import type { Outcome } from './fixtures/debug-mismatch.ts';
import { type LaunchRanks, MEDIA } from './fixtures/media.ts';

const entry = new URL('./fixtures/debug-mismatch.ts', import.meta.url);
/** A long collective timeout: every failure below must come from a check, far sooner. */
const TIMEOUT_MS = 20_000;
const FAST_MS = 5_000;
const outcomesOf =
  (launch: LaunchRanks) =>
  (scenario: string, worldSize = 3) =>
    launch<Outcome>(entry, worldSize, { args: { scenario }, collectiveTimeoutMs: TIMEOUT_MS });

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

describe.each(MEDIA)('in %s', (_medium, launch) => {
  const run = outcomesOf(launch);
  describe('every kind of disagreement fails every rank at once', () => {
    const cases: Array<[string, string, string]> = [
      ['op', 'allReduce(float32[8], sum)', 'allGather(float32[8])'],
      ['shape', 'allReduce(float32[4,8], sum)', 'allReduce(float32[4,9], sum)'],
      ['dtype', 'allReduce(float32[4,8], sum)', 'allReduce(int32[4,8], sum)'],
      ['reduce-op', 'allReduce(int32[4], sum)', 'allReduce(int32[4], max)'],
      ['root-broadcast', 'broadcast(float32[4], src=0)', 'broadcast(float32[4], src=1)'],
      ['root-scatter', 'scatter(float32[4], src=0)', 'scatter(float32[4], src=1)'],
      ['root-reduce', 'reduce(float32[4], dst=0, sum)', 'reduce(float32[4], dst=1, sum)'],
      ['root-gather', 'gather(float32[4], dst=0)', 'gather(float32[4], dst=1)'],
      ['order', 'allReduce(float32[4], sum)', 'broadcast(float32[4], src=0)'],
    ];
    for (const [scenario, mine, theirs] of cases) {
      it(scenario, async () => {
        const outcomes = await run(scenario);
        const failed = expectFailedFast(
          outcomes,
          [0, 1, 2],
          mismatch(mine, theirs),
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

    it('a missing rank: the ranks waiting on it name it and the call', async () => {
      const outcomes = await run('missing');
      expect(outcomes[2].ok).toBe(true);
      expectFailedFast(
        outcomes,
        [0, 1],
        /broadcast\(float32\[4\], src=0\) call #0 on group "world": rank [01] waited for rank 2, which will never make this call: it left its main function/,
        'RankFailedError',
      );
    });

    it('point-to-point size: both ends fail', async () => {
      const outcomes = await run('p2p-size');
      expectFailedFast(
        outcomes,
        [0, 1],
        /rank 1 expects float32\[3\] from rank 0, which sent float32\[4\]/,
        'CollectiveMismatchError',
      );
      for (const o of outcomes.slice(0, 2) as Failed[]) {
        expect(o.message).toMatch(/rank 0 called it at .*debug-mismatch\.ts:\d+/);
        expect(o.message).toMatch(/rank 1 called it at .*debug-mismatch\.ts:\d+/);
      }
    });
  });
});
