import { TensorcommError } from '../runtime/errors.ts';

/**
 * A libnccl call failed. `errno` is its ncclResult_t (named `errno` as on
 * CudaError: `code` is the library's string code), `codeName` the
 * enumerator's name; the message adds ncclGetErrorString and, when NCCL has
 * one, the text of ncclGetLastError (which usually names the actual cause).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class NcclError extends TensorcommError {
  override name = 'NcclError';
  override readonly code: string = 'ERR_TC_NCCL';

  constructor(
    readonly call: string,
    readonly errno: number,
    readonly codeName: string,
    description: string,
    lastError = '',
  ) {
    super(`${call} failed: ${codeName} (${errno}): ${description}${lastError ? `: ${lastError}` : ''}`);
  }
}
