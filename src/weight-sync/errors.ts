/** Errors of the weight-sync engine, so callers can tell a bad stream from a transport failure. */
import { TensorcommError } from '../runtime/errors.ts';

/**
 * The sync failed: senders disagree on the stream, a rank reported a failure, or the engine is unusable.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class WeightSyncError extends TensorcommError {
  override name = 'WeightSyncError';
  override readonly code: string = 'ERR_TC_WEIGHT_SYNC';
}

/**
 * A bucket header does not parse or breaks a limit; the message says which field.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class WeightSyncHeaderError extends WeightSyncError {
  override name = 'WeightSyncHeaderError';
  override readonly code: string = 'ERR_TC_WEIGHT_SYNC_HEADER';
}
