/**
 * Element-wise reductions of tensors on one GPU (ranks sharing a device),
 * with tensorcomm's own kernels: src/cuda/kernels/reduce.ptx, built from
 * reduce.cu, loaded once per device and thread on first use. The kernels
 * share reduce-ops.h with the CUDA test double, so CI checks the same
 * arithmetic the GPU runs, and it matches reduceArrays bit for bit.
 */
import { readFileSync } from 'node:fs';
import { deviceIndex } from '../tensor/device.ts';
import type { ReduceOp } from '../tensor/reduce-ops.ts';
import { Tensor } from '../tensor/tensor.ts';
import { type FunctionHandle, type ModuleHandle, reduceKernelName } from './api.ts';
import { deviceScratch, useDevice } from './device-memory.ts';
import { cudaKernels } from './kernel-loader.ts';

/** The same path from src/cuda/ and from dist/cuda/: the package ships src/. */
const PTX_URL = new URL('../../src/cuda/kernels/reduce.ptx', import.meta.url);
const THREADS_PER_BLOCK = 256;
/** Enough blocks to fill any current GPU; the kernels loop over the rest (grid-stride). */
const MAX_BLOCKS = 4096;

let ptx: string | undefined;
const libraries = new Map<number, ModuleHandle>();
const kernels = new Map<string, FunctionHandle>();

function kernelFor(device: number, op: ReduceOp, dtype: string): FunctionHandle {
  const name = reduceKernelName(op, dtype);
  const key = `${device}/${name}`;
  let kernel = kernels.get(key);
  if (kernel === undefined) {
    let library = libraries.get(device);
    if (library === undefined) {
      ptx ??= readFileSync(PTX_URL, 'utf8');
      library = cudaKernels().loadLibrary(ptx);
      libraries.set(device, library);
    }
    kernel = cudaKernels().getKernel(library, name);
    kernels.set(key, kernel);
  }
  return kernel;
}

/** out = op(inputs...) on out's device; synchronous, like every device Tensor operation. */
export function reduceOnDevice(op: ReduceOp, out: Tensor, inputs: readonly Tensor[]): void {
  if (inputs.length === 1 && inputs[0].devicePointer === out.devicePointer) return;
  const n = out.numel;
  if (n === 0) return;
  const device = deviceIndex(out.device);
  const runtime = useDevice(device, 'reduceOnDevice');
  const kernel = kernelFor(device, op, out.dtype);
  const pointers = new BigInt64Array(inputs.map((t) => BigInt.asIntN(64, t.devicePointer)));
  const list = deviceScratch(out.device, [inputs.length], 'int64', 'reduceOnDevice');
  try {
    list.tensor.copy_(Tensor.fromArray(pointers));
    const blocks = Math.min(MAX_BLOCKS, Math.ceil(n / THREADS_PER_BLOCK));
    cudaKernels().launch(kernel, blocks, THREADS_PER_BLOCK, 0n, [
      out.devicePointer,
      list.tensor.devicePointer,
      inputs.length,
      n,
    ]);
    runtime.streamSynchronize(0n);
  } finally {
    list.release();
  }
}

/** Unloads this thread's kernels (rank teardown). */
export function unloadDeviceKernels(): void {
  for (const library of libraries.values()) cudaKernels().unloadLibrary(library);
  libraries.clear();
  kernels.clear();
}
