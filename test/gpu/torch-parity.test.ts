/**
 * The torch.distributed parity calls that reduce (premulSum, uneven
 * reduceScatter) and barrier's wait for earlier calls, on device tensors: on
 * ranks sharing one GPU (the store and the device kernels) and on ranks with a
 * GPU each (NCCL: ncclRedOpCreatePreMulSum, one ncclReduce per rank).
 */
import { beforeAll, describe, it } from 'vitest';
import { type Device, spawnThreads } from '../../src/index.ts';
import type { scenarios } from '../fixtures/device-parity.ts';
import {
  checkBarrierImpliesWait,
  checkPremulSum,
  checkUnevenReduceScatter,
} from '../fixtures/device-parity-checks.ts';
import { scenarioFixture } from '../fixtures/scenarios.ts';
import { announceSkip, gpu } from './gpu-mode.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('../fixtures/device-parity.ts', import.meta.url));
const N = 3;
const steps = ['premulSum', 'unevenReduceScatter', 'barrierImpliesWait'] as const;
const job = (devices: Device[]) =>
  fixture.runSteps(steps, (entry, args) => spawnThreads(entry, { worldSize: N, devices, args }));

const placements = [
  { name: 'ranks sharing one GPU', devices: (): Device[] => Array(N).fill('cuda:0'), skip: gpu.skipReason },
  {
    name: 'ranks on a GPU each (NCCL)',
    devices: (): Device[] => Array.from({ length: N }, (_, i) => `cuda:${i}` as Device),
    skip: gpu.ncclSkipReason ?? (gpu.devices < N ? `fewer than ${N} GPUs` : undefined),
  },
];

for (const placement of placements) {
  describe.skipIf(announceSkip(`torch parity: ${placement.name}`, placement.skip))(placement.name, () => {
    let results: Awaited<ReturnType<typeof job>>;
    beforeAll(async () => {
      results = await job(placement.devices());
    }, 120_000);

    it('premulSum multiplies each rank by its own factor, then sums, on every reducing call', () => {
      checkPremulSum(results.premulSum);
    });
    it('reduceScatter takes a different size per rank', () => {
      checkUnevenReduceScatter(results.unevenReduceScatter);
    });
    it('a barrier implies the calls before it completed', () => {
      checkBarrierImpliesWait(results.barrierImpliesWait);
    });
  });
}
