/** Error types shared by every layer, so callers can tell the failure modes apart. */

/**
 * The base of every error class tensorcomm defines. `code` names the kind of
 * failure and stays the same across releases while messages may be reworded
 * (Node's `ERR_*` codes, with the `ERR_TC_` prefix): match on it, or on the
 * class, never on message text. The error reference lists every code. Bad
 * arguments stay plain TypeError and RangeError, without a code: they are bugs
 * in the calling code, answered by their message, not failures to handle.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export abstract class TensorcommError extends Error {
  abstract readonly code: string;
}

/**
 * A wait ran past its deadline; the message says who waited for whom.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class CommTimeoutError extends TensorcommError {
  override name = 'CommTimeoutError';
  override readonly code: string = 'ERR_TC_COMM_TIMEOUT';
}

/**
 * Another rank failed (or the job was aborted) while this rank was waiting.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class RankFailedError extends TensorcommError {
  override name = 'RankFailedError';
  override readonly code: string = 'ERR_TC_RANK_FAILED';
  constructor(
    message: string,
    readonly failedRank: number | undefined,
  ) {
    super(message);
  }
}

/**
 * Ranks disagree about a call: different op, shape, dtype, root or reduce op.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class CollectiveMismatchError extends TensorcommError {
  override name = 'CollectiveMismatchError';
  override readonly code: string = 'ERR_TC_COLLECTIVE_MISMATCH';
}

/**
 * spawnThreads / launchProcesses failed: `failures` has one entry per failed rank with its original error,
 * root causes first, then the ranks that failed only because another had (their RankFailedError); the
 * message lists them in that order, and `cause` is the first one's error.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class JobFailedError extends TensorcommError {
  override name = 'JobFailedError';
  override readonly code: string = 'ERR_TC_JOB_FAILED';
  constructor(
    message: string,
    readonly failures: ReadonlyArray<{ rank: number; error: Error }>,
  ) {
    super(message, { cause: failures[0]?.error });
  }
}

/**
 * A call failed because the job's `faults` option said so (spawnThreads, rankTest): a test's doing, not a bug.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class InjectedFaultError extends TensorcommError {
  override name = 'InjectedFaultError';
  override readonly code: string = 'ERR_TC_INJECTED_FAULT';
}

/**
 * A call that the state of its object, or the place it is made, forbids: a
 * destroyed group or a closed store, a future already delivered, a promise
 * already settled, a call that needs a rank made outside one, a rank that is
 * not a member. The object is not broken: the calling code used it at the
 * wrong time or place.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class InvalidStateError extends TensorcommError {
  override name = 'InvalidStateError';
  override readonly code: string = 'ERR_TC_INVALID_STATE';
}

/**
 * What a rank's end found: its main returned without looking at a call it
 * started, while one was still pending, or after one failed with nobody
 * observing it (runtime/work.ts's audit); in a rankTest, also a fault of its
 * `faults` option that never fired. The message names the calls.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class UnfinishedWorkError extends TensorcommError {
  override name = 'UnfinishedWorkError';
  override readonly code: string = 'ERR_TC_UNFINISHED_WORK';
}

/**
 * `error` told in other words: a new error of the same class, with its code
 * and own fields (failedRank, missing, errno…), `message` instead of its
 * message and `error` as its cause. For a layer that puts its own context in
 * front of a lower layer's failure without changing what kind of failure it
 * is. A thrown value that is no Error becomes a plain Error.
 */
export function retold(error: unknown, message: string): Error {
  if (!(error instanceof Error)) return new Error(message, { cause: error });
  const copy = Object.create(Object.getPrototypeOf(error)) as Error;
  Object.assign(copy, error);
  Object.defineProperties(copy, {
    message: { value: message, writable: true, configurable: true },
    cause: { value: error, writable: true, configurable: true },
  });
  Error.captureStackTrace(copy, retold);
  return copy;
}
