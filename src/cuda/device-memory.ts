/**
 * Device memory for this thread: the device checks every device operation
 * starts with, and a caching allocator per device (like PyTorch's, much
 * simpler). Sizes round up to 512 B below 1 MiB and to 2 MiB multiples above;
 * a released block waits in its size's free list for the next request of
 * that size, so a loop that allocates the same buffers each step stops
 * calling cudaMalloc after the first. Blocks go back when released or when
 * their storage object is garbage-collected; releaseDeviceMemory() (rank
 * teardown) frees them all.
 */

import { InvalidStateError } from '../runtime/errors.ts';
import { type DeviceStorage, deviceIndex } from '../tensor/device.ts';
import { type Device, type DType, itemSize } from '../tensor/dtype.ts';
import { numelOf } from '../tensor/shape.ts';
import { Tensor } from '../tensor/tensor.ts';
import { CUDA_CONSTANTS, type CudaRuntimeBinding, cudaRuntime } from './cudart.ts';
import { CudaError, GpuUnavailableError } from './errors.ts';

const SMALL_GRANULE = 512;
const LARGE_GRANULE = 2 << 20;
const LARGE_FROM = 1 << 20;

export interface DeviceMemoryStats {
  /** Bytes (rounded sizes) in blocks held by live storage. */
  allocatedBytes: number;
  /** Bytes in free lists, ready for reuse. */
  cachedBytes: number;
  mallocCalls: number;
  freeCalls: number;
}

/** The allocation behind one block, kept apart from the block so the finalizer can see it. */
interface Allocation {
  readonly device: number;
  readonly size: number;
  readonly pointer: bigint;
  live: boolean;
}

interface DevicePool {
  readonly stats: DeviceMemoryStats;
  /** Rounded size → base addresses ready for reuse. */
  readonly free: Map<number, bigint[]>;
  readonly live: Set<Allocation>;
}

const pools = new Map<number, DevicePool>();
const deviceCounts = new WeakMap<CudaRuntimeBinding, { count: number; reason: string | undefined }>();
/** No CUDA call here: finalizers run between tasks, so they only move the address to its free list. */
const reclaim = new FinalizationRegistry<Allocation>((allocation) => giveBack(allocation));

/**
 * cudaMalloc failed even after the cache was freed.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class DeviceOutOfMemoryError extends CudaError {
  override name = 'DeviceOutOfMemoryError';
  override readonly code: string = 'ERR_TC_DEVICE_OUT_OF_MEMORY';

  constructor(message: string, cause: CudaError) {
    super(cause.call, cause.errno, cause.codeName, '');
    this.message = message;
    this.cause = cause;
  }
}

/** Device memory from the caching allocator; the DeviceStorage of device tensors. */
export class DeviceBlock implements DeviceStorage {
  readonly #allocation: Allocation;

  constructor(allocation: Allocation) {
    this.#allocation = allocation;
  }

  get device(): number {
    return this.#allocation.device;
  }

  /** The rounded size reserved for this block. */
  get size(): number {
    return this.#allocation.size;
  }

  get pointer(): bigint {
    const allocation = this.#allocation;
    if (!allocation.live) {
      throw new InvalidStateError(
        `device memory on cuda:${allocation.device} (${allocation.size} bytes) was used after it was released ` +
          '(by DeviceBlock.release(), or by releaseDeviceMemory() at rank teardown)',
      );
    }
    return allocation.pointer;
  }

  /** Returns the block to its free list now; the block must not be used afterwards. */
  release(): void {
    giveBack(this.#allocation);
  }
}

/** The allocation size a request of `bytes` gets. */
export function roundAllocation(bytes: number): number {
  const granule = bytes < LARGE_FROM ? SMALL_GRANULE : LARGE_GRANULE;
  return Math.ceil(bytes / granule) * granule;
}

/**
 * This thread's runtime with `device` made current. GpuUnavailableError,
 * naming `where` and the device, when libcudart is missing, no device is
 * visible, or the index is past the last device.
 */
export function useDevice(device: number, where: string): CudaRuntimeBinding {
  let cuda: CudaRuntimeBinding;
  try {
    cuda = cudaRuntime();
  } catch (cause) {
    if (!(cause instanceof GpuUnavailableError)) throw cause;
    throw new GpuUnavailableError(`${where}: device 'cuda:${device}' is not available: ${cause.message}`, {
      cause,
    });
  }
  const { count, reason } = visibleDevices(cuda);
  if (count === 0) {
    throw new GpuUnavailableError(
      `${where}: device 'cuda:${device}' is not available: no CUDA device is visible (${reason}; ` +
        `libcudart: ${cuda.path}). A GPU and its driver are needed for device tensors; use 'cpu' without one.`,
    );
  }
  if (device >= count) {
    const visible = process.env.CUDA_VISIBLE_DEVICES;
    throw new GpuUnavailableError(
      `${where}: device 'cuda:${device}' does not exist: ${count} CUDA device${count === 1 ? ' is' : 's are'} ` +
        `visible (cuda:0${count > 1 ? `..cuda:${count - 1}` : ''})` +
        (visible === undefined ? '' : `; CUDA_VISIBLE_DEVICES=${visible}`),
    );
  }
  cuda.setDevice(device);
  return cuda;
}

/** Device memory of at least `bytes` bytes (uninitialised), from the cache when a block of that size is free. */
export function allocateDeviceMemory(device: number, bytes: number, where: string): DeviceBlock {
  const cuda = useDevice(device, where);
  const size = roundAllocation(bytes);
  if (size === 0) return new DeviceBlock({ device, size, pointer: 0n, live: true });
  const pool = poolOf(device);
  let pointer = pool.free.get(size)?.pop();
  if (pointer === undefined) pointer = mallocRetrying(cuda, pool, device, size, bytes, where);
  else pool.stats.cachedBytes -= size;
  const allocation: Allocation = { device, size, pointer, live: true };
  pool.live.add(allocation);
  pool.stats.allocatedBytes += size;
  const block = new DeviceBlock(allocation);
  reclaim.register(block, allocation);
  return block;
}

/**
 * Frees every block of this thread, cached or still held (rank teardown:
 * storage that outlives it throws on use). Frees all it can, then throws the
 * first failure.
 */
export function releaseDeviceMemory(): void {
  const failures: unknown[] = [];
  for (const [device, pool] of pools) {
    if (pool.live.size === 0 && pool.stats.cachedBytes === 0) continue;
    try {
      const cuda = cudaRuntime();
      cuda.setDevice(device);
      for (const allocation of pool.live) {
        allocation.live = false;
        pool.stats.allocatedBytes -= allocation.size;
        freeCounted(cuda, pool, allocation.pointer, failures);
      }
      pool.live.clear();
      freeCached(cuda, pool, failures);
    } catch (error) {
      failures.push(error);
    }
  }
  if (failures.length > 0) throw failures[0];
}

/** Per device ('cuda:N') of this thread. */
export function deviceMemoryStats(): Record<string, DeviceMemoryStats> {
  return Object.fromEntries([...pools].map(([device, pool]) => [`cuda:${device}`, { ...pool.stats }]));
}

/** The device count never changes while a process runs, so it is asked once per loaded library. */
function visibleDevices(cuda: CudaRuntimeBinding): { count: number; reason: string | undefined } {
  let known = deviceCounts.get(cuda);
  if (known === undefined) {
    const count = cuda.deviceCount();
    known = { count, reason: cuda.noDeviceReason() };
    deviceCounts.set(cuda, known);
  }
  return known;
}

function poolOf(device: number): DevicePool {
  let pool = pools.get(device);
  if (pool === undefined) {
    pool = {
      stats: { allocatedBytes: 0, cachedBytes: 0, mallocCalls: 0, freeCalls: 0 },
      free: new Map(),
      live: new Set(),
    };
    pools.set(device, pool);
  }
  return pool;
}

function giveBack(allocation: Allocation): void {
  if (!allocation.live || allocation.size === 0) return;
  allocation.live = false;
  const pool = poolOf(allocation.device);
  pool.live.delete(allocation);
  pool.stats.allocatedBytes -= allocation.size;
  pool.stats.cachedBytes += allocation.size;
  const list = pool.free.get(allocation.size);
  if (list === undefined) pool.free.set(allocation.size, [allocation.pointer]);
  else list.push(allocation.pointer);
}

/** On out-of-memory, frees this device's cache and tries once more. */
function mallocRetrying(
  cuda: CudaRuntimeBinding,
  pool: DevicePool,
  device: number,
  size: number,
  requested: number,
  where: string,
): bigint {
  try {
    return mallocCounted(cuda, pool, size);
  } catch (error) {
    if (!isOutOfMemory(error)) throw error;
  }
  const freed = pool.stats.cachedBytes;
  const failures: unknown[] = [];
  freeCached(cuda, pool, failures);
  if (failures.length > 0) throw failures[0];
  try {
    return mallocCounted(cuda, pool, size);
  } catch (error) {
    if (!isOutOfMemory(error)) throw error;
    throw new DeviceOutOfMemoryError(
      `${where}: out of memory on cuda:${device}: cudaMalloc of ${size} bytes (a ${requested}-byte request, ` +
        `rounded) failed again after freeing ${freed} cached bytes; this thread holds ${pool.stats.allocatedBytes} ` +
        `bytes in live device tensors on cuda:${device} (${error.message})`,
      error,
    );
  }
}

function isOutOfMemory(error: unknown): error is CudaError {
  return error instanceof CudaError && error.errno === CUDA_CONSTANTS.cudaErrorMemoryAllocation;
}

function mallocCounted(cuda: CudaRuntimeBinding, pool: DevicePool, size: number): bigint {
  pool.stats.mallocCalls++;
  return cuda.malloc(size);
}

/** cudaFree, counted; a failure is collected so the remaining blocks are still freed. */
function freeCounted(cuda: CudaRuntimeBinding, pool: DevicePool, pointer: bigint, failures: unknown[]): void {
  pool.stats.freeCalls++;
  try {
    cuda.free(pointer);
  } catch (error) {
    failures.push(error);
  }
}

/** Frees every cached block of the pool; the device must be current. */
function freeCached(cuda: CudaRuntimeBinding, pool: DevicePool, failures: unknown[]): void {
  for (const [size, pointers] of pool.free) {
    for (const pointer of pointers) {
      pool.stats.cachedBytes -= size;
      freeCounted(cuda, pool, pointer, failures);
    }
  }
  pool.free.clear();
}

/** A device tensor whose memory goes back to the cache by `release()` rather than at GC. */
export interface DeviceScratch {
  readonly tensor: Tensor;
  release(): void;
}

/**
 * Scratch space for one step of a communication call. Released as soon as
 * the step is done, so a loop of calls reuses the same block instead of
 * calling cudaMalloc until the garbage collector catches up.
 */
export function deviceScratch(
  device: Device,
  shape: readonly number[],
  dtype: DType,
  where: string,
): DeviceScratch {
  const bytes = numelOf(shape) * itemSize(dtype);
  const block = allocateDeviceMemory(deviceIndex(device), bytes, where);
  return {
    tensor: Tensor.fromDevicePointer(block.pointer, device, shape, dtype),
    release: () => block.release(),
  };
}
