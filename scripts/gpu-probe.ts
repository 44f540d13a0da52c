/**
 * What this machine offers the GPU path: the CUDA runtime and NCCL libraries
 * found (or why not) and the visible devices. Exits 1 when no device can be
 * used, so scripts/gpu-check.sh stops before the GPU suite.
 */
import { cudaRuntime } from '../src/cuda/cudart.ts';
import { ncclLibrary } from '../src/nccl/nccl-library.ts';

function describe<T>(what: string, get: () => T, show: (value: T) => string): T | undefined {
  try {
    const value = get();
    console.log(`${what}: ${show(value)}`);
    return value;
  } catch (error) {
    console.log(`${what}: ${(error as Error).message}`);
    return undefined;
  }
}

const cuda = describe('libcudart', cudaRuntime, (rt) => rt.path);
const devices = cuda
  ? describe(
      'CUDA devices',
      () => cuda.deviceCount(),
      (count) => `${count}${count === 0 ? ` (${cuda.noDeviceReason()})` : ''}`,
    )
  : undefined;
describe('libnccl', ncclLibrary, (nccl) => `${nccl.path} (version ${nccl.version()})`);
process.exitCode = devices !== undefined && devices > 0 ? 0 : 1;
