import { describe, expect, it } from 'vitest';
import { launchProcesses } from '../src/index.ts';
import { rankV8Flags } from '../src/launch/rank-v8-flags.ts';

const SYNC_COMPILE = '--no-concurrent-recompilation';

describe('rank processes V8 flags', () => {
  it('compile on the rank thread only where the node ranks take every core', () => {
    expect(rankV8Flags(2, undefined, 2)).toEqual([SYNC_COMPILE]);
    expect(rankV8Flags(8, undefined, 2)).toEqual([SYNC_COMPILE]);
    expect(rankV8Flags(2, undefined, 3)).toEqual([]);
    expect(rankV8Flags(8, '', 16)).toEqual([]);
  });

  it("leave the choice to the user's NODE_OPTIONS where it names one", () => {
    expect(rankV8Flags(4, '--concurrent-recompilation', 2)).toEqual([]);
    expect(rankV8Flags(4, '--max-old-space-size=4096 --no-concurrent_recompilation', 2)).toEqual([]);
    expect(rankV8Flags(4, '--max-old-space-size=4096', 2)).toEqual([SYNC_COMPILE]);
  });

  it('launchProcesses starts its ranks with them', { timeout: 60_000 }, async () => {
    const entry = new URL('./fixtures/exec-argv-rank.ts', import.meta.url);
    const nproc = 2;
    const expected = rankV8Flags(nproc, process.env.NODE_OPTIONS);
    const argvs = await launchProcesses<string[]>(entry, { nproc });
    for (const argv of argvs) {
      expect(argv.includes(SYNC_COMPILE)).toBe(expected.length > 0);
      expect(argv).toEqual(expect.arrayContaining(expected));
    }
  });
});
