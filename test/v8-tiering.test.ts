/**
 * Ranks set V8's TurboFan tier-up to 1,000 calls where Maglev is on (V8 13,
 * Node 24, and later), so a long call path's compiles end early in a job
 * instead of taking cores from spinning ranks over its first 20,000 calls
 * (src/runtime/v8-tiering.ts); a flag the user gave stays.
 */
import { describe, expect, it } from 'vitest';
import { rankTieringFlag } from '../src/runtime/v8-tiering.ts';

describe('rank tiering', () => {
  it('tiers up to TurboFan after 1,000 calls where V8 has Maglev on by default', () => {
    expect(rankTieringFlag('13.6.233.17-node.40', '')).toBe('--invocation-count-for-turbofan=1000');
    expect(rankTieringFlag('14.2.1', '--enable-source-maps')).toBe('--invocation-count-for-turbofan=1000');
  });
  it('leaves older V8s (Node 20, 22: no Maglev) as they are', () => {
    expect(rankTieringFlag('12.4.254.21-node.33', '')).toBeUndefined();
    expect(rankTieringFlag('11.3.244.8-node.31', '')).toBeUndefined();
  });
  it("leaves the user's own setting, in either spelling", () => {
    expect(rankTieringFlag('13.6.233.17', '--invocation-count-for-turbofan=5000')).toBeUndefined();
    expect(
      rankTieringFlag('13.6.233.17', '--max-old-space-size=4096 --invocation_count_for_turbofan=10'),
    ).toBeUndefined();
  });
});
