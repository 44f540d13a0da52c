/**
 * The errors of the GPU layer. Plain classes with no library behind them, so
 * any layer may throw or catch them without loading CUDA.
 */

/**
 * No usable GPU: the CUDA or NCCL library is missing, no device is visible,
 * or a device index is out of range. The message says what is missing and
 * how to fix it (which env var to set, what to install).
 */
export class GpuUnavailableError extends Error {
  override name = 'GpuUnavailableError';
}

/**
 * A libcudart call failed; `codeName` and the text come from cudaGetErrorName /
 * cudaGetErrorString. `subject` names what the call was about when that helps
 * (a kernel's name).
 */
export class CudaError extends Error {
  override name = 'CudaError';

  constructor(
    readonly call: string,
    readonly code: number,
    readonly codeName: string,
    description: string,
    subject?: string,
  ) {
    super(`${call}${subject ? ` (${subject})` : ''} failed: ${codeName} (${code}): ${description}`);
  }
}
