/** Errors of the file store that callers may want to tell apart. */
import { TensorcommError } from '../runtime/errors.ts';

/**
 * The file store cannot use its job directory or the machine's shared memory:
 * the directory is missing, not private to this user, or not a job directory;
 * another store of the same rank uses it; a system call failed (mmap,
 * memfd_create, posix_fallocate); a peer's ring file is missing or its
 * sealed file cannot be opened. The message names the call, the path and the
 * errno.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class FileStoreError extends TensorcommError {
  override name = 'FileStoreError';
  override readonly code: string = 'ERR_TC_FILE_STORE';
}

/**
 * A file in the job directory is not a well-formed store file (bad header, truncated payload).
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class FileStoreCorruptError extends TensorcommError {
  override name = 'FileStoreCorruptError';
  override readonly code: string = 'ERR_TC_FILE_STORE_CORRUPT';
}

/**
 * The job directory's file system (tmpfs under /dev/shm by default) has no
 * room for a value: raised by the call that wanted the room, before anything
 * was written or mapped, so no process ever faults on a page it cannot get.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class ShmSpaceError extends TensorcommError {
  override name = 'ShmSpaceError';
  override readonly code: string = 'ERR_TC_SHM_NO_SPACE';

  constructor(
    /** The directory whose file system is full. */
    readonly dir: string,
    /** The bytes the call needed. */
    readonly wantedBytes: number,
    /** The bytes free there when it asked (for an unprivileged user). */
    readonly freeBytes: number,
    where: string,
  ) {
    super(
      `${where}: no space for ${formatBytes(wantedBytes)} in ${dir} (${formatBytes(freeBytes)} free). ` +
        'Give the job more shared memory (Docker: --shm-size, e.g. --shm-size=8g; Kubernetes: an ' +
        'emptyDir with medium Memory on /dev/shm) or point TENSORCOMM_SHM_DIR at a directory with room.',
    );
  }
}

function formatBytes(bytes: number): string {
  if (bytes < 1 << 20) return `${bytes} bytes`;
  return `${(bytes / (1 << 20)).toFixed(1)} MiB (${bytes} bytes)`;
}
