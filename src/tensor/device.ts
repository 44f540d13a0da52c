/** Where tensor storage may live in this build. The GPU backend replaces this check. */
import type { Device } from './dtype.ts';

export function requireHostDevice(device: Device, where: string): 'cpu' {
  if (device !== 'cpu') {
    throw new Error(
      `${where}: device '${device}' needs the GPU backend (CUDA tensors), which is not available in this build; use 'cpu'`,
    );
  }
  return device;
}
