/**
 * CudaKernelLoader over libcudart's library-management API
 * (cudaLibraryLoadData / cudaLibraryGetKernel / cudaLaunchKernel), bound from
 * the same libcudart as cudaRuntime() so kernels run in its context.
 */
import { koffi, koffiType } from '../runtime/koffi.ts';
import type { CudaKernelLoader, ModuleHandle } from './api.ts';
import { cudaCheck } from './cudart.ts';
import { GpuUnavailableError } from './errors.ts';
import { CUDART_LIBRARY, type LoadedLibrary, lazyBinding, messageOf } from './library-loader.ts';

/** dim3: three unsigned ints, passed by value. */
const dim3 = koffiType((k) => k.struct({ x: 'uint32_t', y: 'uint32_t', z: 'uint32_t' }));

/** koffi's size of dim3, to compare with the header's sizeof. */
export const dim3Bytes = (): number => koffi().sizeof(dim3());

/** CUDA's limit on a grid's x dimension and on threads per block. */
const MAX_GRID_X = 2 ** 31 - 1;
const MAX_BLOCK_THREADS = 1024;

/** Kernels of this thread's libcudart; loads it on the first call. */
export const cudaKernels: () => CudaKernelLoader = lazyBinding(CUDART_LIBRARY, bindKernels);

function bindKernels(library: LoadedLibrary): CudaKernelLoader {
  const check = cudaCheck(library);
  let c: ReturnType<typeof declare>;
  try {
    c = declare(library);
  } catch (error) {
    throw new GpuUnavailableError(
      `cudaKernels: ${library.path} lacks the runtime's library-management API (cudaLibraryLoadData, ` +
        `cudaLibraryGetKernel), which tensorcomm's device reductions need: ${messageOf(error)}. Use a newer ` +
        `CUDA 12 or 13 runtime, or point ${CUDART_LIBRARY.envVar} at one.`,
    );
  }
  // The runtime may read a lazily loaded image after the load call returns: keep each one until unloaded.
  const images = new Map<ModuleHandle, Buffer>();
  const handleSlot = new BigUint64Array(1);

  return {
    path: library.path,
    loadLibrary(ptx) {
      const image = Buffer.from(`${ptx}\0`, 'utf8');
      check('cudaLibraryLoadData', c.libraryLoadData(handleSlot, image, null, null, 0, null, null, 0));
      const module = handleSlot[0];
      images.set(module, image);
      return module;
    },
    getKernel(module, name) {
      check('cudaLibraryGetKernel', c.libraryGetKernel(handleSlot, module, name), name);
      return handleSlot[0];
    },
    unloadLibrary(module) {
      check('cudaLibraryUnload', c.libraryUnload(module));
      images.delete(module);
    },
    launch(kernel, grid, block, stream, args) {
      checkDimension('grid', grid, MAX_GRID_X);
      checkDimension('block', block, MAX_BLOCK_THREADS);
      // Each parameter as a 64-bit value in one array; the kernel gets a pointer to each.
      const values = BigUint64Array.from(args, (arg, index) => kernelArgument(arg, index));
      const pointers = args.map((_, index) => values.subarray(index, index + 1));
      check(
        'cudaLaunchKernel',
        c.launchKernel(kernel, { x: grid, y: 1, z: 1 }, { x: block, y: 1, z: 1 }, pointers, 0, stream),
      );
    },
  };
}

function declare(library: LoadedLibrary) {
  const lib = library.handle;
  return {
    libraryLoadData: lib.func(
      'int cudaLibraryLoadData(uint64_t *library, const void *code, void *jitOptions, void *jitOptionsValues, unsigned int numJitOptions, void *libraryOptions, void *libraryOptionValues, unsigned int numLibraryOptions)',
    ),
    libraryGetKernel: lib.func('int cudaLibraryGetKernel(uint64_t *kernel, void *library, const char *name)'),
    libraryUnload: lib.func('int cudaLibraryUnload(void *library)'),
    launchKernel: lib.func('cudaLaunchKernel', 'int', [
      'void *',
      dim3(),
      dim3(),
      'void **',
      'size_t',
      'void *',
    ]),
  };
}

function checkDimension(what: string, value: number, max: number): void {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`cudaLaunchKernel: ${what} size must be an integer in [1, ${max}], got ${value}`);
  }
}

function kernelArgument(arg: bigint | number, index: number): bigint {
  if (typeof arg === 'bigint') return BigInt.asUintN(64, arg);
  if (Number.isSafeInteger(arg) && arg >= 0) return BigInt(arg);
  throw new TypeError(
    `cudaLaunchKernel: argument ${index} must be a device pointer (bigint) or a non-negative integer, got ${arg}`,
  );
}
