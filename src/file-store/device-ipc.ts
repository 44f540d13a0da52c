/**
 * The seam through which FileTensorStore hands GPU tensors between processes
 * by CUDA IPC. The store sits below the GPU layer (src/cuda/), which fills
 * this in when tensorcomm is imported; the store itself never loads CUDA.
 */
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface ExportedTensor {
  device: number;
  /** The cudaIpcMemHandle_t of the allocation holding the tensor. */
  handle: Uint8Array;
  /** Bytes from the allocation's start to the tensor's element [0,...,0]. */
  offset: number;
}

export interface OpenedTensor {
  tensor: Tensor;
  /** Closes the IPC mapping; the tensor must not be touched afterwards. */
  close(): void;
}

export interface DeviceIpc {
  exportTensor(tensor: Tensor): ExportedTensor;
  openTensor(exported: ExportedTensor, shape: readonly number[], dtype: DType): OpenedTensor;
}

let registered: DeviceIpc | undefined;

export function registerDeviceIpc(ipc: DeviceIpc): void {
  registered = ipc;
}

export function deviceIpc(where: string): DeviceIpc {
  if (!registered) {
    // The package root registers it: only code that imports tensorcomm's modules past it gets here.
    throw new Error(
      `${where}: GPU tensors between processes need tensorcomm's GPU layer; import them from 'tensorcomm'`,
    );
  }
  return registered;
}
