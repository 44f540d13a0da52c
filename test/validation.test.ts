import { beforeAll, describe, expect, it } from 'vitest';
import { spawnThreads } from '../src/index.ts';
import { expectAllFailed, type Failed } from './fixtures/expect-all-failed.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';
import type { scenarios } from './fixtures/validation.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/validation.ts', import.meta.url));
const ranks = (worldSize: number) => (entry: URL, args: object) =>
  spawnThreads(entry, { worldSize, args, collectiveTimeoutMs: 20_000 });

/**
 * Two jobs run every scenario, one after the other on the same ranks (a
 * reported mismatch leaves the group usable). Each one's first scenario is
 * the world's call #0; `missing-rank`, where a rank leaves its main function,
 * comes last.
 */
const threeRanks = ['shape', 'after-mismatch'] as const;
const twoRanks = [
  'root',
  'dtype',
  'op',
  'reduce-op',
  'non-contiguous',
  'non-contiguous-broadcast',
  'root-out-of-range',
  'band-on-float',
  'p2p-size',
  'missing-rank',
] as const;
let three: Awaited<ReturnType<typeof runThree>>;
let two: Awaited<ReturnType<typeof runTwo>>;
const runThree = () => fixture.runSteps(threeRanks, ranks(3));
const runTwo = () => fixture.runSteps(twoRanks, ranks(2));
/** A hook that runs one job of several scenarios gets the time of the tests it stands for (60 s each by default). */
const SHARED_JOB_MS = 120_000;
beforeAll(async () => {
  three = await runThree();
}, SHARED_JOB_MS);
beforeAll(async () => {
  two = await runTwo();
}, SHARED_JOB_MS);

describe('mismatched calls fail on every rank involved', () => {
  it('shape', () => {
    const outcomes = three.shape;
    expectAllFailed(
      outcomes,
      /called allReduce\(float32\[\d\], sum\) as call #0 on group "world", but rank \d called allReduce\(float32\[\d\], sum\)/,
      'CollectiveMismatchError',
    );
    expect(outcomes.map((o) => (o as Failed).message).join('\n')).toContain('float32[5]');
  });
  it('dtype', () => {
    expectAllFailed(
      two.dtype,
      /allReduce\(int32\[4\], sum\).*allReduce\(float32\[4\], sum\)|allReduce\(float32\[4\], sum\).*allReduce\(int32\[4\], sum\)/,
    );
  });
  it('op', () => {
    expectAllFailed(two.op, /allGather\(float32\[4\]\)/);
  });
  it('reduce op', () => {
    expectAllFailed(two['reduce-op'], /allReduce\(int32\[4\], max\)/);
  });
  it('root: the fingerprint exchange of rooted calls catches it, with both call sites', () => {
    const outcomes = two.root;
    expectAllFailed(
      outcomes,
      /called broadcast\(float32\[4\], src=\d\) as call #0 on group "world", but rank \d called broadcast\(float32\[4\], src=\d\) as call #0/,
      'CollectiveMismatchError',
    );
    for (const o of outcomes as Failed[]) {
      expect(o.message).toMatch(/rank 0 called it at .*validation\.ts:\d+/);
      expect(o.message).toMatch(/rank 1 called it at .*validation\.ts:\d+/);
    }
  });
  it('point-to-point size', () => {
    expectAllFailed(two['p2p-size'], /expects float32\[3\] from rank 0, which sent float32\[4\]/);
  });
  it('a group stays usable after a reported mismatch', () => {
    expect(three['after-mismatch']).toEqual([
      [6, 6],
      [6, 6],
      [6, 6],
    ]);
  });
});

describe('bad arguments', () => {
  it('a non-contiguous tensor on one rank fails it locally and its peers at once', () => {
    const [peer, culprit] = two['non-contiguous'] as Failed[];
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
  it('the same on a rooted call, where the culprit only reads', () => {
    const [root, culprit] = two['non-contiguous-broadcast'] as Failed[];
    expect(culprit.message).toMatch(/call \.contiguous\(\) first/);
    expect(root).toMatchObject({ ok: false });
    expect(root.message).toMatch(/rank 1.*broadcast: tensor float32\[3,2\] is not contiguous/);
  });
  it('a root out of range', () => {
    expectAllFailed(
      two['root-out-of-range'],
      /broadcast: src 7 is not a rank of group "world" \(size 2\)/,
      'RangeError',
    );
  });
  it('a bitwise op on floats', () => {
    expectAllFailed(two['band-on-float'], /band.*float32/, 'TypeError');
  });
  it('a rank that returns without making the call: its peers fail at once, naming it', () => {
    const [waiting, absent] = two['missing-rank'];
    expect(absent.ok).toBe(true);
    expect(waiting).toMatchObject({ ok: false, name: 'RankFailedError' });
    // Its job's collectives before it (all but p2p-size's send and recv, which have no call number) were calls #0 to #7.
    expect((waiting as Failed).message).toMatch(
      /allReduce\(float32\[4\], sum\) call #8 on group "world": rank 0 waited for rank 1, which will never make this call: it left its main function/,
    );
    expect((waiting as Failed).ms).toBeLessThan(5_000);
  });
});
