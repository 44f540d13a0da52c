/**
 * What tensorcomm needs from libcudart, as typed synchronous calls. Handles are opaque BigInt pointers (koffi 3);
 * unique ids and IPC handles are byte arrays, never strings. Every failing
 * call throws a CudaError naming the call and the library's own
 * error name and text. Call these only from the rank's own thread.
 */

/** A device address (or an address inside a device allocation). */
export type DevicePointer = bigint;
/** `0n` is the legacy default stream. */
export type StreamHandle = bigint;
export type EventHandle = bigint;
export type ModuleHandle = bigint;
export type FunctionHandle = bigint;

/** Host memory as the copy calls take it: any Uint8Array, SharedArrayBuffer-backed included. */
export type HostBytes = Uint8Array;

export const CUDA_IPC_HANDLE_BYTES = 64;

export interface CudaRuntime {
  /** The file the library was loaded from. */
  readonly path: string;
  /** Number of visible devices; 0 when the driver reports none (cudaErrorNoDevice / InsufficientDriver). */
  deviceCount(): number;
  setDevice(index: number): void;
  getDevice(): number;
  deviceSynchronize(): void;
  malloc(bytes: number): DevicePointer;
  free(pointer: DevicePointer): void;
  /** cudaMemcpy with cudaMemcpyDefault (unified addressing picks the direction). */
  copy(target: DevicePointer | HostBytes, source: DevicePointer | HostBytes, bytes: number): void;
  copyAsync(
    target: DevicePointer | HostBytes,
    source: DevicePointer | HostBytes,
    bytes: number,
    stream: StreamHandle,
  ): void;
  memsetAsync(pointer: DevicePointer, value: number, bytes: number, stream: StreamHandle): void;
  /** cudaStreamNonBlocking: never implicitly ordered after the legacy default stream. */
  streamCreate(): StreamHandle;
  streamDestroy(stream: StreamHandle): void;
  streamSynchronize(stream: StreamHandle): void;
  streamWaitEvent(stream: StreamHandle, event: EventHandle): void;
  /** Always cudaEventDisableTiming; `interprocess` adds cudaEventInterprocess. */
  eventCreate(options?: { interprocess?: boolean }): EventHandle;
  eventRecord(event: EventHandle, stream: StreamHandle): void;
  /** True when complete, false on cudaErrorNotReady; other errors throw. */
  eventQuery(event: EventHandle): boolean;
  eventSynchronize(event: EventHandle): void;
  eventDestroy(event: EventHandle): void;
  /** 64-byte cudaIpcMemHandle_t of the allocation containing `pointer` (its base). */
  ipcGetMemHandle(pointer: DevicePointer): Uint8Array;
  /** Opens with cudaIpcMemLazyEnablePeerAccess. */
  ipcOpenMemHandle(handle: Uint8Array): DevicePointer;
  ipcCloseMemHandle(pointer: DevicePointer): void;
  ipcGetEventHandle(event: EventHandle): Uint8Array;
  ipcOpenEventHandle(handle: Uint8Array): EventHandle;
}

/**
 * tensorcomm's own kernels (device-side reductions), loaded from PTX through the
 * runtime's library-management API (CUDA 12+: cudaLibraryLoadData,
 * cudaLibraryGetKernel, cudaLaunchKernel), which manages the context itself.
 */
export interface CudaKernelLoader {
  readonly path: string;
  /** Loads a PTX image (text) for the current device. */
  loadLibrary(ptx: string): ModuleHandle;
  getKernel(library: ModuleHandle, name: string): FunctionHandle;
  unloadLibrary(library: ModuleHandle): void;
  /**
   * cudaLaunchKernel on a 1-D grid. `args` are the kernel's parameters in
   * order, each passed by value: a DevicePointer as a 64-bit pointer, a number
   * as a 64-bit unsigned integer (the only parameter kinds tensorcomm's
   * kernels take).
   */
  launch(
    kernel: FunctionHandle,
    grid: number,
    block: number,
    stream: StreamHandle,
    args: ReadonlyArray<DevicePointer | number>,
  ): void;
}

/**
 * The reduction kernels' contract, shared by the CUDA source
 * (src/cuda/kernels/reduce.cu), its PTX and the C test double:
 * `tc_reduce_<op>_<dtype>(T *out, const T *const *inputs, uint64 count, uint64 n)`
 * sets out[i] = op(inputs[0][i], ..., inputs[count-1][i]) for i < n, with the
 * semantics of reduceArrays (halves accumulate in float32 and round once;
 * integers wrap; integer avg truncates; bool is logical). `inputs` is a device
 * array of `count` device pointers; `out` may equal one of them.
 */
export function reduceKernelName(op: string, dtype: string): string {
  return `tc_reduce_${op}_${dtype}`;
}
