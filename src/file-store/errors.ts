/** Errors of the file store that callers may want to tell apart. */

/** A file in the job directory is not a well-formed store file (bad header, truncated payload). */
export class FileStoreCorruptError extends Error {
  override name = 'FileStoreCorruptError';
}
