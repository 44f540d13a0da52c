/**
 * The errors of the GPU layer. Plain classes with no library behind them, so
 * any layer may throw or catch them without loading CUDA.
 */
import { TensorcommError } from '../runtime/errors.ts';

/**
 * No usable GPU: the CUDA or NCCL library is missing, no device is visible,
 * or a device index is out of range. The message says what is missing and
 * how to fix it (which env var to set, what to install).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class GpuUnavailableError extends TensorcommError {
  override name = 'GpuUnavailableError';
  override readonly code: string = 'ERR_TC_GPU_UNAVAILABLE';
}

/**
 * A libcudart call failed; `errno` is its cudaError_t, `codeName` and the text
 * come from cudaGetErrorName / cudaGetErrorString. `subject` names what the
 * call was about when that helps (a kernel's name). The number is `errno`, not
 * `code`, because `code` is the library's string code on every error class
 * (as Node's system errors carry `code` and `errno`).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class CudaError extends TensorcommError {
  override name = 'CudaError';
  override readonly code: string = 'ERR_TC_CUDA';

  constructor(
    readonly call: string,
    readonly errno: number,
    readonly codeName: string,
    description: string,
    subject?: string,
  ) {
    super(`${call}${subject ? ` (${subject})` : ''} failed: ${codeName} (${errno}): ${description}`);
  }
}
