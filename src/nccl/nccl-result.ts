/** NcclErrors for results that come back later, from ncclCommGetAsyncError, rather than from the call itself. */
import { NcclError } from './errors.ts';
import { ncclResultName } from './nccl-library.ts';

/** `call` failed asynchronously: its non-blocking communicator reported `code`. */
export function ncclResultError(call: string, code: number): NcclError {
  return new NcclError(call, code, ncclResultName(code), 'reported later by ncclCommGetAsyncError');
}
