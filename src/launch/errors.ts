/** Errors of the launchers, so callers can tell a job that never ran from one whose ranks failed. */
import { TensorcommError } from '../runtime/errors.ts';

/**
 * A rank could not be started, or ended without reporting: the entry module
 * does not exist, a rank's thread or process exited (or was killed) before
 * its main returned, a pooled rank thread did not start in time, a process
 * was not started the way initProcess needs (its environment, its job's
 * description), or the launcher was stopped by its `signal`.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class LaunchError extends TensorcommError {
  override name = 'LaunchError';
  override readonly code: string = 'ERR_TC_LAUNCH';
}
