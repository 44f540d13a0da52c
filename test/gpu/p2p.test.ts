/**
 * P2P between named workers with GPU tensors: over NCCL between distinct
 * GPUs, and through the store (device pointers) when both share one; CPU and
 * GPU tensors of one message take their own paths and come back in place.
 */
import { describe, expect, it } from 'vitest';
import { spawnThreads } from '../../src/index.ts';
import type { GpuP2PResult } from '../fixtures/gpu-p2p.ts';
import { announceSkip, TWO_RANK_PLACEMENTS } from './gpu-mode.ts';

const entry = new URL('../fixtures/gpu-p2p.ts', import.meta.url);

describe.each(TWO_RANK_PLACEMENTS)('p2p with GPU tensors on %s', (_title, devices, skipReason) => {
  it.skipIf(announceSkip(`p2p on ${_title}`, skipReason))(
    'mixed messages both ways at once, and lone tensors, arrive intact and in order',
    async () => {
      const results = await spawnThreads<GpuP2PResult>(entry, {
        worldSize: 2,
        names: ['actor', 'learner'],
        devices,
      });
      for (const [rank, result] of results.entries()) {
        const peer = 1 - rank;
        expect(result.mixed.map((m) => m.label)).toEqual([0, 1, 2].map((i) => `from ${peer} #${i}`));
        result.mixed.forEach((m, i) => {
          const base = peer * 1000 + i * 10;
          expect(m.cpu).toEqual([base, base + 1, base + 2]);
          expect(m.gpu).toEqual([base + 0.5, base + 0.5]);
          expect(m.gpuDevice).toBe(devices[rank]);
        });
        // Each direction of GPU traffic has a group of its own: 0>1 and 1>0.
        expect(result.directionGroups.map((key) => key.split(':').at(-1)).sort()).toEqual(['0>1', '1>0']);
      }
      expect(results[1].lone).toEqual([0, 1, 2, 3]);
      expect(results[1].loneDevice).toBe(devices[1]);
    },
  );
});
