import { describe, expect, it } from 'vitest';
import { spawnThreads } from '../src/index.ts';

const entry = new URL('./fixtures/validation.ts', import.meta.url);
type Outcome = { ok: boolean; name?: string; message?: string; ms?: number };
const run = (scenario: string, worldSize = 2) =>
  spawnThreads(entry, { worldSize, args: { scenario }, collectiveTimeoutMs: 20_000 }) as Promise<Outcome[]>;

/** Every rank failed, quickly (far below the 20 s collective timeout), with a message matching `pattern`. */
function expectAllFailed(outcomes: Outcome[], pattern: RegExp, name?: string): void {
  for (const [rank, o] of outcomes.entries()) {
    expect(o.ok, `rank ${rank} should fail`).toBe(false);
    expect(o.message, `rank ${rank}`).toMatch(pattern);
    if (name) expect(o.name, `rank ${rank}`).toBe(name);
    expect(o.ms, `rank ${rank} took too long`).toBeLessThan(5_000);
  }
}

describe('mismatched calls fail on every rank involved', () => {
  it('shape', async () => {
    const outcomes = await run('shape', 3);
    expectAllFailed(
      outcomes,
      /called allReduce\(float32\[\d\], sum\) as call #0 on group "world", but rank \d called allReduce\(float32\[\d\], sum\)/,
      'CollectiveMismatchError',
    );
    expect(outcomes.map((o) => o.message).join('\n')).toContain('float32[5]');
  });
  it('dtype', async () => {
    expectAllFailed(
      await run('dtype'),
      /allReduce\(int32\[4\], sum\).*allReduce\(float32\[4\], sum\)|allReduce\(float32\[4\], sum\).*allReduce\(int32\[4\], sum\)/,
    );
  });
  it('op', async () => {
    expectAllFailed(await run('op'), /allGather\(float32\[4\]\)/);
  });
  it('reduce op', async () => {
    expectAllFailed(await run('reduce-op'), /allReduce\(int32\[4\], max\)/);
  });
  it('root: the fingerprint exchange of rooted calls catches it, with both call sites', async () => {
    const outcomes = await run('root');
    expectAllFailed(
      outcomes,
      /called broadcast\(float32\[4\], src=\d\) as call #0 on group "world", but rank \d called broadcast\(float32\[4\], src=\d\) as call #0/,
      'CollectiveMismatchError',
    );
    for (const o of outcomes) {
      expect(o.message).toMatch(/rank 0 called it at .*validation\.ts:\d+/);
      expect(o.message).toMatch(/rank 1 called it at .*validation\.ts:\d+/);
    }
  });
  it('point-to-point size', async () => {
    expectAllFailed(await run('p2p-size'), /expects float32\[3\] from rank 0, which sent float32\[4\]/);
  });
  it('a group stays usable after a reported mismatch', async () => {
    expect(await run('after-mismatch', 3)).toEqual([
      [6, 6],
      [6, 6],
      [6, 6],
    ]);
  });
});

describe('bad arguments', () => {
  it('a non-contiguous tensor on one rank fails it locally and its peers at once', async () => {
    const [peer, culprit] = await run('non-contiguous');
    expect(culprit).toMatchObject({ ok: false, name: 'TypeError' });
    expect(culprit.message).toMatch(
      /allReduce: tensor float32\[3,2\] is not contiguous.*call \.contiguous\(\) first/,
    );
    expect(peer).toMatchObject({ ok: false });
    expect(peer.message).toMatch(
      /group rank 1 failed this call: allReduce: tensor float32\[3,2\] is not contiguous/,
    );
    expect(peer.ms).toBeLessThan(5_000);
  });
  it('the same on a rooted call, where the culprit only reads', async () => {
    const [root, culprit] = await run('non-contiguous-broadcast');
    expect(culprit.message).toMatch(/call \.contiguous\(\) first/);
    expect(root).toMatchObject({ ok: false });
    expect(root.message).toMatch(/rank 1.*broadcast: tensor float32\[3,2\] is not contiguous/);
  });
  it('a root out of range', async () => {
    expectAllFailed(
      await run('root-out-of-range'),
      /broadcast: src 7 is not a rank of group "world" \(size 2\)/,
      'RangeError',
    );
  });
  it('a bitwise op on floats', async () => {
    expectAllFailed(await run('band-on-float'), /band.*float32/, 'TypeError');
  });
  it('a rank that returns without making the call: its peers fail at once, naming it', async () => {
    const [waiting, absent] = await run('missing-rank');
    expect(absent.ok).toBe(true);
    expect(waiting).toMatchObject({ ok: false, name: 'RankFailedError' });
    expect(waiting.message).toMatch(
      /allReduce\(float32\[4\], sum\) call #0 on group "world": rank 0 waited for rank 1, which will never make this call: it left its main function/,
    );
    expect(waiting.ms).toBeLessThan(5_000);
  });
});
