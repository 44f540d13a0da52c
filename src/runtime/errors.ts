/** Error types shared by every layer, so callers can tell the failure modes apart. */

/** A wait ran past its deadline; the message says who waited for whom. */
export class CommTimeoutError extends Error {
  override name = 'CommTimeoutError';
}

/** Another rank failed (or the job was aborted) while this rank was waiting. */
export class RankFailedError extends Error {
  override name = 'RankFailedError';
  constructor(
    message: string,
    readonly failedRank: number | undefined,
  ) {
    super(message);
  }
}

/** Ranks disagree about a call: different op, shape, dtype, root or reduce op. */
export class CollectiveMismatchError extends Error {
  override name = 'CollectiveMismatchError';
}

/** spawnThreads / launchProcesses failed: one entry per failed rank, original errors attached. */
export class JobFailedError extends Error {
  override name = 'JobFailedError';
  constructor(
    message: string,
    readonly failures: ReadonlyArray<{ rank: number; error: Error }>,
  ) {
    super(message, { cause: failures[0]?.error });
  }
}

/** A call failed because the job's `faults` option said so (spawnThreads, rankTest): a test's doing, not a bug. */
export class InjectedFaultError extends Error {
  override name = 'InjectedFaultError';
}
