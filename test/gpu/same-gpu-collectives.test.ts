/**
 * Ranks sharing one GPU (the single-GPU simulation of TP/CP): every
 * collective and dtype on device tensors, as threads (device pointers through
 * the memory store) and as processes (CUDA IPC through the file store),
 * against the single-threaded reference.
 */
import { describe } from 'vitest';
import { DTYPES, launchProcesses, spawnThreads } from '../../src/index.ts';
import { conformanceSuite } from '../fixtures/conformance-suite.ts';
import { announceSkip, gpu } from './gpu-mode.ts';

const sameGpu = (n: number) => Array.from({ length: n }, () => 'cuda:0' as const);

describe.skipIf(announceSkip('same-GPU collectives', gpu.skipReason))('same-GPU ranks', () => {
  conformanceSuite(
    'device collectives in threads on one GPU',
    (entry, worldSize, args) => spawnThreads(entry, { worldSize, args, devices: sameGpu(worldSize) }),
    // One rank alone is on a GPU of its own: that is NCCL's case (nccl-collectives.test.ts).
    [2, 3],
    { dtypes: [...DTYPES], onDevice: true },
  );
  conformanceSuite(
    'device collectives in processes on one GPU',
    (entry, nproc, args) =>
      launchProcesses(entry, { nproc, args, devices: sameGpu(nproc), output: () => {} }),
    [2],
    { dtypes: [...DTYPES], onDevice: true },
  );
});
