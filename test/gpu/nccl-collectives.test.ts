/**
 * Ranks on distinct GPUs run on NCCL: every collective on device tensors
 * against the reference. World size 1 on a one-GPU machine; more ranks where
 * there are more devices (the test double has four).
 */
import { describe } from 'vitest';
import { type DType, spawnThreads } from '../../src/index.ts';
import { conformanceSuite } from '../fixtures/conformance-suite.ts';
import { announceSkip, gpu } from './gpu-mode.ts';

/** The dtypes NCCL has (no int16), with bool mapped onto uint8. */
const NCCL_DTYPES: DType[] = [
  'float64',
  'float32',
  'float16',
  'bfloat16',
  'int64',
  'int32',
  'int8',
  'uint8',
  'bool',
];
const distinct = (n: number) => Array.from({ length: n }, (_, i) => `cuda:${i}` as const);
const worldSizes = [1, 2, 3].filter((n) => n <= gpu.devices);

describe.skipIf(announceSkip('NCCL collectives', gpu.skipReason ?? gpu.ncclSkipReason))('NCCL ranks', () => {
  conformanceSuite(
    'NCCL collectives in threads on distinct GPUs',
    (entry, worldSize, args) => spawnThreads(entry, { worldSize, args, devices: distinct(worldSize) }),
    worldSizes,
    // NCCL has no bitwise reductions (torch refuses them on NCCL too).
    { dtypes: NCCL_DTYPES, onDevice: true, ops: ['sum', 'avg', 'prod', 'min', 'max'] },
  );
});
