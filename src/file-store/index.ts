/** The file store's public surface (the launcher and process contexts import it from here). */
export { FileStoreCorruptError, FileStoreError, ShmSpaceError } from './errors.ts';
export { type FileStoreOptions, FileTensorStore } from './file-tensor-store.ts';
export { abortJob, type JobAbort, readJobAbort } from './job-abort.ts';
export {
  cleanupStaleJobDirectories,
  createJobDirectory,
  defaultStoreRoot,
  type JobDirectoryInfo,
  type JobDirectoryOptions,
  jobDirectoryInfo,
  removeJobDirectory,
} from './job-directory.ts';
export type { RingChannelOptions } from './ring-channels.ts';
export { PayloadKind } from './value-header.ts';
