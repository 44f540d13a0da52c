/**
 * Where the GPU suite runs: on a real GPU when this machine has one, on the
 * C test double of CUDA/NCCL when TENSORCOMM_GPU_SUITE=double (npm test does
 * a second pass that way, so the suite itself is exercised without a GPU),
 * and nowhere otherwise: the suite is skipped with the reason printed.
 * TENSORCOMM_GPU_SUITE=require (scripts/gpu-check.sh) turns a missing GPU
 * into a failure instead of a skip.
 */

import { cudaRuntime } from '../../src/cuda/cudart.ts';
import type { Device } from '../../src/index.ts';
import { ncclLibrary } from '../../src/nccl/nccl-library.ts';
import { useCudaDouble } from '../cuda-double/build.ts';

export interface GpuMode {
  kind: 'real' | 'double' | 'none';
  /** Devices visible to the suite. */
  devices: number;
  /** Why the suite (or its NCCL part) cannot run here; undefined when it can. */
  skipReason: string | undefined;
  ncclSkipReason: string | undefined;
}

const DOUBLE_DEVICES = 4;

async function detect(): Promise<GpuMode> {
  const wanted = process.env.TENSORCOMM_GPU_SUITE;
  if (wanted === 'double') {
    await useCudaDouble(DOUBLE_DEVICES);
    return { kind: 'double', devices: DOUBLE_DEVICES, skipReason: undefined, ncclSkipReason: undefined };
  }
  let devices = 0;
  let reason: string;
  try {
    const runtime = cudaRuntime();
    devices = runtime.deviceCount();
    reason = `no CUDA device visible to ${runtime.path}: ${runtime.noDeviceReason() ?? 'none reported'}`;
  } catch (error) {
    reason = (error as Error).message;
  }
  if (devices === 0) {
    if (wanted === 'require') throw new Error(`TENSORCOMM_GPU_SUITE=require, but ${reason}`);
    return { kind: 'none', devices, skipReason: reason, ncclSkipReason: reason };
  }
  let ncclSkipReason: string | undefined;
  try {
    ncclLibrary().version();
  } catch (error) {
    ncclSkipReason = (error as Error).message;
  }
  return { kind: 'real', devices, skipReason: undefined, ncclSkipReason };
}

export const gpu = await detect();

/** Prints why a part of the suite is skipped, so a skipped run says so. */
export function announceSkip(part: string, reason: string | undefined): boolean {
  if (reason !== undefined) console.warn(`GPU suite: skipping ${part}: ${reason}`);
  return reason !== undefined;
}

/**
 * Two ranks sharing one GPU (the store) and two ranks on a GPU each (NCCL),
 * each with why it cannot run here (undefined when it can), for describe.each.
 */
export const TWO_RANK_PLACEMENTS: Array<[string, Device[], string | undefined]> = [
  ['one shared GPU (store)', ['cuda:0', 'cuda:0'], gpu.skipReason],
  [
    'two GPUs (NCCL)',
    ['cuda:0', 'cuda:1'],
    gpu.skipReason ?? gpu.ncclSkipReason ?? (gpu.devices < 2 ? 'fewer than two GPUs' : undefined),
  ],
];
