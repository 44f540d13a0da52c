/**
 * CUDA IPC for FileTensorStore: a producer process exports the allocation
 * holding a GPU tensor (each caching-allocator block is its own cudaMalloc,
 * so the tensor's byte offset in its storage is its offset in the
 * allocation); a consumer opens it, views the tensor in it, and closes the
 * mapping when its get finishes — before the producer may free or reuse it.
 * Data is ready when it is published: device Tensor operations are
 * synchronous, so no IPC event is needed on this path. Importing this module
 * registers it (src/index.ts does); nothing loads CUDA until a GPU tensor is
 * published.
 */
import {
  type DeviceIpc,
  type ExportedTensor,
  type OpenedTensor,
  registerDeviceIpc,
} from '../file-store/device-ipc.ts';
import { deviceIndex } from '../tensor/device.ts';
import type { DType } from '../tensor/dtype.ts';
import { Tensor } from '../tensor/tensor.ts';
import { useDevice } from './device-memory.ts';

export const cudaDeviceIpc: DeviceIpc = {
  exportTensor(tensor: Tensor): ExportedTensor {
    const device = deviceIndex(tensor.device);
    const runtime = useDevice(device, 'FileTensorStore srcSet of a GPU tensor');
    const base = tensor.devicePointer - BigInt(tensor.byteOffset);
    return { device, handle: runtime.ipcGetMemHandle(base), offset: tensor.byteOffset };
  },

  openTensor(exported: ExportedTensor, shape: readonly number[], dtype: DType): OpenedTensor {
    const where = 'FileTensorStore destGet of a GPU tensor';
    const runtime = useDevice(exported.device, where);
    const base = runtime.ipcOpenMemHandle(exported.handle);
    let open = true;
    const tensor = Tensor.fromDevicePointer(
      base + BigInt(exported.offset),
      `cuda:${exported.device}`,
      shape,
      dtype,
    );
    return {
      tensor,
      close() {
        if (!open) return;
        open = false;
        useDevice(exported.device, where).ipcCloseMemHandle(base);
      },
    };
  },
};

registerDeviceIpc(cudaDeviceIpc);
