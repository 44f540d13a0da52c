/** Collectives on GPU tensors in a loop stop calling cudaMalloc after their first round, on both backends. */
import { describe, expect, it } from 'vitest';
import { type Device, spawnThreads } from '../../src/index.ts';
import { announceSkip, gpu } from './gpu-mode.ts';

const entry = new URL('../fixtures/gpu-loop-rank.ts', import.meta.url);

const placements: Array<[string, Device[], string | undefined]> = [
  ['one shared GPU (store)', ['cuda:0', 'cuda:0'], gpu.skipReason],
  [
    'two GPUs (NCCL)',
    ['cuda:0', 'cuda:1'],
    gpu.skipReason ?? gpu.ncclSkipReason ?? (gpu.devices < 2 ? 'fewer than two GPUs' : undefined),
  ],
];

describe.each(placements)('allocations on %s', (title, devices, skipReason) => {
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
