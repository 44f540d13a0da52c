/**
 * Where tensor storage may live. Host storage is plain JavaScript memory;
 * device storage comes from a backend that src/cuda/device-backend.ts
 * registers, so the tensor layer never imports the CUDA bindings (and merely
 * loading tensorcomm never loads a CUDA library).
 */
import type { Device } from './dtype.ts';

/** Device memory a tensor's elements live in; every view on it keeps it allocated. */
export interface DeviceStorage {
  /** The N of 'cuda:N'. */
  readonly device: number;
  /** Base address; reading it throws once the memory was released (rank teardown). */
  readonly pointer: bigint;
}

/** A host byte range or a device address, as cudaMemcpy takes them. */
export type CopyEndpoint = Uint8Array | bigint;

/** The few device operations Tensor needs. Each makes `device` the current device first. */
export interface DeviceBackend {
  /** Uninitialised memory, returned to the allocator once the storage is unreachable. */
  allocate(device: number, bytes: number, where: string): DeviceStorage;
  /** Throws unless `device` is present (for views on memory someone else allocated). */
  checkDevice(device: number, where: string): void;
  /** Synchronous for host endpoints; between device addresses, ordered on the legacy default stream. */
  copy(device: number, target: CopyEndpoint, source: CopyEndpoint, bytes: number): void;
  /** Sets `bytes` bytes to `value` (0..255), ordered on the legacy default stream. */
  memset(device: number, pointer: bigint, value: number, bytes: number): void;
}

let registered: DeviceBackend | undefined;

export function registerDeviceBackend(backend: DeviceBackend): void {
  registered = backend;
}

/** The registered backend, or an error naming the call and the device that needed it. */
export function deviceBackend(device: Device, where: string): DeviceBackend {
  if (registered === undefined) {
    // Plain Error (this layer lies below TensorcommError's): the package root registers the backend,
    // so only code that imports tensorcomm's modules past it gets here.
    throw new Error(
      `${where}: device '${device}' needs the GPU backend (CUDA tensors), which is not available: it is not ` +
        `loaded in this program; import 'tensorcomm' (which registers it) or src/cuda/device-backend.ts, or use 'cpu'`,
    );
  }
  return registered;
}

/** The N of a parsed 'cuda:N'. */
export function deviceIndex(device: Device): number {
  return Number(device.slice('cuda:'.length));
}
