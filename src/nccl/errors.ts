/**
 * A libnccl call failed. `codeName` is the ncclResult_t enumerator's name;
 * the message adds ncclGetErrorString and, when NCCL has one, the text of
 * ncclGetLastError (which usually names the actual cause).
 */
export class NcclError extends Error {
  override name = 'NcclError';

  constructor(
    readonly call: string,
    readonly code: number,
    readonly codeName: string,
    description: string,
    lastError = '',
  ) {
    super(`${call} failed: ${codeName} (${code}): ${description}${lastError ? `: ${lastError}` : ''}`);
  }
}
