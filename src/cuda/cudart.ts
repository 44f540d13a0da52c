/**
 * CudaRuntime over libcudart through koffi: synchronous calls (never koffi's
 * `.async`, whose thread pool would run them off the rank's thread and its
 * current device). Handles come back through a reused one-slot BigUint64Array
 * written by the call itself; host memory is passed as the Uint8Array's own
 * bytes (koffi hands C the buffer's address, SharedArrayBuffer-backed ones
 * included), never copied.
 */
import { koffi, koffiType } from '../runtime/koffi.ts';
import { CUDA_IPC_HANDLE_BYTES, type CudaRuntime, type DevicePointer, type HostBytes } from './api.ts';
import { CudaError } from './errors.ts';
import { CUDART_LIBRARY, type LoadedLibrary, lazyBinding } from './library-loader.ts';

/** The cudaError_t / enum / flag values used here, as in the CUDA headers (checked by test/cuda-headers.test.ts). */
export const CUDA_CONSTANTS = {
  cudaSuccess: 0,
  cudaErrorMemoryAllocation: 2,
  cudaErrorInsufficientDriver: 35,
  cudaErrorNoDevice: 100,
  cudaErrorNotReady: 600,
  cudaMemcpyDefault: 4,
  cudaStreamNonBlocking: 0x1,
  cudaEventDisableTiming: 0x2,
  cudaEventInterprocess: 0x4,
  cudaIpcMemLazyEnablePeerAccess: 0x1,
} as const;

/** cudaIpcMemHandle_t and cudaIpcEventHandle_t: `struct { char reserved[64]; }`, passed by value to the Open calls. */
const ipcHandle = koffiType((k) => k.struct({ reserved: k.array('uint8_t', CUDA_IPC_HANDLE_BYTES) }));

/** koffi's sizes of the structs passed by value, to compare with the headers' sizeof. */
export const cudaStructSizes = () => ({
  cudaIpcMemHandle_t: koffi().sizeof(ipcHandle()),
  cudaIpcEventHandle_t: koffi().sizeof(ipcHandle()),
});

export interface CudaRuntimeBinding extends CudaRuntime {
  /**
   * Why the last deviceCount() returned 0: the call and the driver's error
   * name and text (no device visible, or no / too old a driver). Undefined
   * before deviceCount() is called and after it found devices.
   */
  noDeviceReason(): string | undefined;
}

/** The runtime of this thread; loads libcudart on the first call (GpuUnavailableError when it cannot be found). */
export const cudaRuntime: () => CudaRuntimeBinding = lazyBinding(CUDART_LIBRARY, bindRuntime);

export type CudaCheck = (call: string, code: number, subject?: string) => void;

/** Throws a CudaError named after the call when `code` is not cudaSuccess. */
export function cudaCheck(library: LoadedLibrary): CudaCheck {
  const describe = cudaErrorText(library);
  return (call, code, subject) => {
    if (code !== CUDA_CONSTANTS.cudaSuccess) {
      const { name, text } = describe(code);
      throw new CudaError(call, code, name, text, subject);
    }
  };
}

function cudaErrorText(library: LoadedLibrary): (code: number) => { name: string; text: string } {
  const errorName = library.handle.func('const char *cudaGetErrorName(int error)');
  const errorString = library.handle.func('const char *cudaGetErrorString(int error)');
  return (code) => ({ name: errorName(code) ?? `cudaError ${code}`, text: errorString(code) ?? '' });
}

function bindRuntime(library: LoadedLibrary): CudaRuntimeBinding {
  const lib = library.handle;
  const check = cudaCheck(library);
  const describe = cudaErrorText(library);
  const c = {
    getDeviceCount: lib.func('int cudaGetDeviceCount(int *count)'),
    setDevice: lib.func('int cudaSetDevice(int device)'),
    getDevice: lib.func('int cudaGetDevice(int *device)'),
    deviceSynchronize: lib.func('int cudaDeviceSynchronize()'),
    malloc: lib.func('int cudaMalloc(uint64_t *devPtr, size_t size)'),
    free: lib.func('int cudaFree(void *devPtr)'),
    memcpy: lib.func('int cudaMemcpy(void *dst, const void *src, size_t count, int kind)'),
    memcpyAsync: lib.func(
      'int cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, void *stream)',
    ),
    memsetAsync: lib.func('int cudaMemsetAsync(void *devPtr, int value, size_t count, void *stream)'),
    streamCreateWithFlags: lib.func('int cudaStreamCreateWithFlags(uint64_t *stream, unsigned int flags)'),
    streamDestroy: lib.func('int cudaStreamDestroy(void *stream)'),
    streamSynchronize: lib.func('int cudaStreamSynchronize(void *stream)'),
    streamWaitEvent: lib.func('int cudaStreamWaitEvent(void *stream, void *event, unsigned int flags)'),
    eventCreateWithFlags: lib.func('int cudaEventCreateWithFlags(uint64_t *event, unsigned int flags)'),
    eventRecord: lib.func('int cudaEventRecord(void *event, void *stream)'),
    eventQuery: lib.func('int cudaEventQuery(void *event)'),
    eventSynchronize: lib.func('int cudaEventSynchronize(void *event)'),
    eventDestroy: lib.func('int cudaEventDestroy(void *event)'),
    ipcGetMemHandle: lib.func('int cudaIpcGetMemHandle(uint8_t *handle, void *devPtr)'),
    ipcOpenMemHandle: lib.func('cudaIpcOpenMemHandle', 'int', ['uint64_t *', ipcHandle(), 'unsigned int']),
    ipcCloseMemHandle: lib.func('int cudaIpcCloseMemHandle(void *devPtr)'),
    ipcGetEventHandle: lib.func('int cudaIpcGetEventHandle(uint8_t *handle, void *event)'),
    ipcOpenEventHandle: lib.func('cudaIpcOpenEventHandle', 'int', ['uint64_t *', ipcHandle()]),
  };
  // Safe to share: every call is synchronous on this thread and reads the slot right away.
  const handleSlot = new BigUint64Array(1);
  const intSlot = new Int32Array(1);
  let noDeviceReason: string | undefined;

  const newHandle = (call: string, code: number): bigint => {
    check(call, code);
    return handleSlot[0];
  };

  return {
    path: library.path,
    noDeviceReason: () => noDeviceReason,
    deviceCount() {
      const code = c.getDeviceCount(intSlot);
      if (code === CUDA_CONSTANTS.cudaErrorNoDevice || code === CUDA_CONSTANTS.cudaErrorInsufficientDriver) {
        const { name, text } = describe(code);
        noDeviceReason = `cudaGetDeviceCount: ${name}: ${text}`;
        return 0;
      }
      check('cudaGetDeviceCount', code);
      noDeviceReason = undefined;
      return intSlot[0];
    },
    setDevice(index) {
      if (!Number.isInteger(index) || index < 0) {
        throw new RangeError(`cudaSetDevice: device index must be a non-negative integer, got ${index}`);
      }
      check('cudaSetDevice', c.setDevice(index));
    },
    getDevice() {
      check('cudaGetDevice', c.getDevice(intSlot));
      return intSlot[0];
    },
    deviceSynchronize: () => check('cudaDeviceSynchronize', c.deviceSynchronize()),
    malloc(bytes) {
      checkByteCount('cudaMalloc', bytes);
      return newHandle('cudaMalloc', c.malloc(handleSlot, bytes));
    },
    free: (pointer) => check('cudaFree', c.free(pointer)),
    copy(target, source, bytes) {
      checkCopy('cudaMemcpy', target, source, bytes);
      check('cudaMemcpy', c.memcpy(target, source, bytes, CUDA_CONSTANTS.cudaMemcpyDefault));
    },
    copyAsync(target, source, bytes, stream) {
      checkCopy('cudaMemcpyAsync', target, source, bytes);
      check(
        'cudaMemcpyAsync',
        c.memcpyAsync(target, source, bytes, CUDA_CONSTANTS.cudaMemcpyDefault, stream),
      );
    },
    memsetAsync(pointer, value, bytes, stream) {
      checkByteCount('cudaMemsetAsync', bytes);
      check('cudaMemsetAsync', c.memsetAsync(pointer, value, bytes, stream));
    },
    streamCreate: () =>
      newHandle(
        'cudaStreamCreateWithFlags',
        c.streamCreateWithFlags(handleSlot, CUDA_CONSTANTS.cudaStreamNonBlocking),
      ),
    streamDestroy: (stream) => check('cudaStreamDestroy', c.streamDestroy(stream)),
    streamSynchronize: (stream) => check('cudaStreamSynchronize', c.streamSynchronize(stream)),
    streamWaitEvent: (stream, event) => check('cudaStreamWaitEvent', c.streamWaitEvent(stream, event, 0)),
    eventCreate(options) {
      const flags =
        CUDA_CONSTANTS.cudaEventDisableTiming |
        (options?.interprocess ? CUDA_CONSTANTS.cudaEventInterprocess : 0);
      return newHandle('cudaEventCreateWithFlags', c.eventCreateWithFlags(handleSlot, flags));
    },
    eventRecord: (event, stream) => check('cudaEventRecord', c.eventRecord(event, stream)),
    eventQuery(event) {
      const code = c.eventQuery(event);
      if (code === CUDA_CONSTANTS.cudaErrorNotReady) return false;
      check('cudaEventQuery', code);
      return true;
    },
    eventSynchronize: (event) => check('cudaEventSynchronize', c.eventSynchronize(event)),
    eventDestroy: (event) => check('cudaEventDestroy', c.eventDestroy(event)),
    ipcGetMemHandle(pointer) {
      const handle = new Uint8Array(CUDA_IPC_HANDLE_BYTES);
      check('cudaIpcGetMemHandle', c.ipcGetMemHandle(handle, pointer));
      return handle;
    },
    ipcOpenMemHandle(handle) {
      checkIpcHandle('cudaIpcOpenMemHandle', handle);
      return newHandle(
        'cudaIpcOpenMemHandle',
        c.ipcOpenMemHandle(handleSlot, { reserved: handle }, CUDA_CONSTANTS.cudaIpcMemLazyEnablePeerAccess),
      );
    },
    ipcCloseMemHandle: (pointer) => check('cudaIpcCloseMemHandle', c.ipcCloseMemHandle(pointer)),
    ipcGetEventHandle(event) {
      const handle = new Uint8Array(CUDA_IPC_HANDLE_BYTES);
      check('cudaIpcGetEventHandle', c.ipcGetEventHandle(handle, event));
      return handle;
    },
    ipcOpenEventHandle(handle) {
      checkIpcHandle('cudaIpcOpenEventHandle', handle);
      return newHandle('cudaIpcOpenEventHandle', c.ipcOpenEventHandle(handleSlot, { reserved: handle }));
    },
  } satisfies CudaRuntimeBinding;
}

function checkByteCount(call: string, bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new RangeError(`${call}: byte count must be a non-negative integer, got ${bytes}`);
  }
}

/** C would read or write past a host array's end without complaint: refuse first. */
function checkCopy(
  call: string,
  target: DevicePointer | HostBytes,
  source: DevicePointer | HostBytes,
  bytes: number,
): void {
  checkByteCount(call, bytes);
  for (const [role, side] of [
    ['target', target],
    ['source', source],
  ] as const) {
    if (typeof side !== 'bigint' && !(side instanceof Uint8Array)) {
      throw new TypeError(`${call}: ${role} must be a device pointer (bigint) or a Uint8Array`);
    }
    if (side instanceof Uint8Array && side.byteLength < bytes) {
      throw new RangeError(
        `${call}: ${role} host array holds ${side.byteLength} bytes, fewer than the ${bytes} to copy`,
      );
    }
  }
}

function checkIpcHandle(call: string, handle: Uint8Array): void {
  if (!(handle instanceof Uint8Array) || handle.byteLength !== CUDA_IPC_HANDLE_BYTES) {
    throw new TypeError(`${call}: an IPC handle is a Uint8Array of ${CUDA_IPC_HANDLE_BYTES} bytes`);
  }
}
