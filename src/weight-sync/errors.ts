/** Errors of the weight-sync engine, so callers can tell a bad stream from a transport failure. */

/** The sync failed: senders disagree on the stream, a rank reported a failure, or the engine is unusable. */
export class WeightSyncError extends Error {
  override name = 'WeightSyncError';
}

/** A bucket header does not parse or breaks a limit; the message says which field. */
export class WeightSyncHeaderError extends WeightSyncError {
  override name = 'WeightSyncHeaderError';
}
