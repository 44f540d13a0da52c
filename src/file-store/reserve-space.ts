/**
 * Reserves file space before it is used through a mapping. tmpfs allocates a
 * page on first touch; when the file system is full that touch is a SIGBUS,
 * which kills the process. posix_fallocate allocates the pages up front, so a
 * full /dev/shm is an error of the call that wanted the room (ShmSpaceError,
 * naming the directory, the bytes wanted and free, and the fix), and a later
 * touch of a reserved page never faults. A sealed memory file's pages
 * (sealed-files.ts) are memory, not room in a directory: there a refusal
 * names the memory.
 */
import { statfsSync } from 'node:fs';
import { hasLibc, libc } from '../runtime/libc.ts';
import { FileStoreError, ShmSpaceError } from './errors.ts';
import { isSealed } from './sealed-files.ts';

const ENOSPC = 28;
const EDQUOT = 122;
const ENOMEM = 12;
const EINTR = 4;

/** Bytes an unprivileged user may still write under `dir` (0 when that cannot be told). */
export function freeBytes(dir: string): number {
  try {
    const stat = statfsSync(dir);
    return stat.bavail * stat.bsize;
  } catch {
    return 0;
  }
}

/**
 * Allocates bytes `offset`..`offset + length` of the open file `fd` under
 * `dir`, growing the file if it is shorter. Where libc is unavailable nothing
 * is mapped, and writes report a full file system themselves (asSpaceError).
 */
export function reserveFileSpace(
  fd: number,
  offset: number,
  length: number,
  dir: string,
  where: string,
): void {
  if (length <= 0 || !hasLibc()) return;
  let code: number;
  // tmpfs gives up an allocation when a signal arrives; Node's own signals (SIGCHLD…) may.
  do code = libc().posixFallocate(fd, offset, length);
  while (code === EINTR);
  if (code === 0) return;
  if ((code === ENOSPC || code === ENOMEM) && isSealed(fd)) {
    throw new FileStoreError(
      `${where}: no memory for ${length} bytes of a sealed memory file (errno ${code}): the machine, ` +
        "or the job's memory limit, has no room for them",
    );
  }
  if (code === ENOSPC || code === EDQUOT) throw new ShmSpaceError(dir, length, freeBytes(dir), where);
  throw new FileStoreError(`${where}: reserving ${length} bytes of a file in ${dir} failed (errno ${code})`);
}

/** `error` as a ShmSpaceError when it says the file system is full (ENOSPC, EDQUOT); otherwise itself. */
export function asSpaceError(error: unknown, dir: string, wanted: number, where: string): unknown {
  if (error instanceof ShmSpaceError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return error;
  return new ShmSpaceError(dir, wanted, freeBytes(dir), where);
}
