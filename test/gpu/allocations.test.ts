/** Collectives on GPU tensors in a loop stop calling cudaMalloc after their first round, on both backends. */
import { describe, expect, it } from 'vitest';
import { spawnThreads } from '../../src/index.ts';
import { announceSkip, TWO_RANK_PLACEMENTS } from './gpu-mode.ts';

const entry = new URL('../fixtures/gpu-allocations.ts', import.meta.url);

describe.each(TWO_RANK_PLACEMENTS)('allocations on %s', (title, devices, skipReason) => {
  it.skipIf(announceSkip(`allocations on ${title}`, skipReason))(
    'the rounds after the first reuse cached blocks',
    async () => {
      const results = await spawnThreads<{ firstRound: number; later: number }>(entry, {
        worldSize: 2,
        devices,
      });
      for (const { later } of results) expect(later).toBe(0);
    },
  );
});
