/**
 * Registers the CUDA implementation of the tensor layer's device seam. Only
 * function references change hands here: libcudart loads on the first device
 * operation, never on import.
 */
import { registerDeviceBackend } from '../tensor/device.ts';
import { allocateDeviceMemory, useDevice } from './device-memory.ts';

/** The legacy default stream: device tensor operations are ordered on it. */
const LEGACY_STREAM = 0n;

registerDeviceBackend({
  allocate: allocateDeviceMemory,
  checkDevice(device, where) {
    useDevice(device, where);
  },
  copy(device, target, source, bytes) {
    useDevice(device, 'cudaMemcpy').copy(target, source, bytes);
  },
  memset(device, pointer, value, bytes) {
    useDevice(device, 'cudaMemsetAsync').memsetAsync(pointer, value, bytes, LEGACY_STREAM);
  },
});
