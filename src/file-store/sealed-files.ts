/**
 * Sealed memory files for the files of a job directory that ranks map
 * (producers' arenas, ring inboxes, value files too large to read whole).
 * A read of a mapped page past the end of its file is a SIGBUS, which kills
 * the process, and any process with the job directory's permissions can
 * truncate a file there. A memory file (memfd_create) sealed against
 * shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW, then F_SEAL_SEAL)
 * keeps its size for good: nobody, its creator included, can truncate it, so
 * a mapping of one never faults.
 *
 * A memory file has no name in a directory: its owner links it into the job
 * directory as a symbolic link to /proc/<pid>/fd/<n>, under the name the
 * plain file had, so ranks find it as before, and opening the link opens the
 * memory file itself (thread ranks of one process and process ranks alike).
 * The kernel allows that where the opener may ptrace-read the owner (the
 * same user, a PID namespace where the owner is visible): a weaker form of
 * the permission process_vm_readv (cross-memory.ts) needs, reading rather
 * than attaching, which Yama's ptrace_scope does not limit. A truncate
 * through the link is refused (EPERM). The owner keeps the descriptor open while the link exists and
 * removes the link before closing it, so a link never names a descriptor
 * number that was closed and given to another file.
 *
 * A memory file's pages are the owner's shared memory (charged to its memory
 * cgroup), not space of the job directory's file system: a small /dev/shm
 * holds only the small files.
 *
 * Where this process cannot make them (memfd_create or sealing refused: an
 * old kernel, a seccomp filter; no /proc), or TENSORCOMM_SEALED_FILES=0,
 * those files are plain files of the job directory (a refusal is said once
 * on stderr):
 * the store checks a plain arena's size before every view and copy, and a
 * value file's before mapping it, which turns a truncation into a
 * FileStoreCorruptError at the next call; a truncation between that check
 * and the read, or of a ring file, is still a SIGBUS.
 */
import { closeSync, ftruncateSync, lstatSync, openSync, readlinkSync, symlinkSync } from 'node:fs';
import { basename } from 'node:path';
import { koffi } from '../runtime/koffi.ts';
import { errno, hasLibc } from '../runtime/libc.ts';
import { FileStoreError } from './errors.ts';
import { removeIfPresent } from './present-files.ts';

export const SEALED_FILES_ENV = 'TENSORCOMM_SEALED_FILES';

const MFD_CLOEXEC = 1;
const MFD_ALLOW_SEALING = 2;
const F_ADD_SEALS = 1033;
const F_GET_SEALS = 1034;
const F_SEAL_SEAL = 1;
const F_SEAL_SHRINK = 2;
const F_SEAL_GROW = 4;

interface Bindings {
  close: (fd: number) => number;
  /** fcntl is variadic: an int argument is passed as `'int', value`. */
  fcntl: (fd: number, cmd: number, ...arg: unknown[]) => number;
}

let bound: Bindings | undefined;
let memfdCreate: ((name: string, flags: number) => number) | undefined;

function bindings(): Bindings {
  if (!bound) {
    const lib = koffi().load('libc.so.6');
    bound = { close: lib.func('int close(int fd)'), fcntl: lib.func('int fcntl(int fd, int cmd, ...)') };
  }
  return bound;
}

/** Bound apart, and apart from libc.ts: a libc without it (glibc before 2.27) only turns sealing off. */
function memfd(): (name: string, flags: number) => number {
  memfdCreate ??= koffi().load('libc.so.6').func('int memfd_create(const char *name, unsigned int flags)');
  return memfdCreate;
}

let makes: boolean | undefined;

/** Whether this process makes sealed memory files (decided once; a refusal is said on stderr). */
export function makesSealedFiles(): boolean {
  makes ??= decide();
  return makes;
}

function decide(): boolean {
  // Without libc nothing is mapped, so there is nothing to seal.
  if (process.env[SEALED_FILES_ENV] === '0' || !hasLibc()) return false;
  const refused = probe();
  if (refused === undefined) return true;
  console.warn(
    `tensorcomm file store: sealed memory files are unavailable (${refused}); the files ranks map are ` +
      'plain files of the job directory, and a process that truncates one while a rank reads it ' +
      `crashes that rank (SIGBUS). ${SEALED_FILES_ENV}=0 chooses plain files without this warning.`,
  );
  return false;
}

/** Why this process cannot make a sealed memory file (and open it through /proc); undefined when it can. */
function probe(): string | undefined {
  try {
    closeSync(createSealedFile('probe', 0));
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** A new memory file of `size` bytes, sealed at that size; `name` shows in /proc/<pid>/fd. */
export function createSealedFile(name: string, size: number): number {
  const { close, fcntl } = bindings();
  const made = memfd()(`tensorcomm:${name}`, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (made < 0) throw new FileStoreError(`memfd_create failed (errno ${errno()})`);
  // Node's own descriptor of it, opened through /proc: a worker thread may close only descriptors that
  // Node opened in it (it warns otherwise), and closes them itself when the thread ends.
  let fd: number;
  try {
    fd = openSync(linkTarget(made), 'r+');
  } finally {
    close(made);
  }
  try {
    ftruncateSync(fd, size);
    if (fcntl(fd, F_ADD_SEALS, 'int', F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !== 0) {
      throw new FileStoreError(`sealing a memory file failed (errno ${errno()})`);
    }
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return fd;
}

/** Whether nobody can shrink the open file `fd`: a view of it never needs a size check. */
export function isSealed(fd: number): boolean {
  if (!hasLibc()) return false;
  // -1 (a file that cannot carry seals) has every bit set.
  const seals = bindings().fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_SHRINK) !== 0;
}

function linkTarget(fd: number): string {
  return `/proc/${process.pid}/fd/${fd}`;
}

/** Makes the sealed file `fd` reachable at `path` (EEXIST when taken); keep `fd` open until removeJobFile. */
export function linkSealedFile(fd: number, path: string): void {
  symlinkSync(linkTarget(fd), path);
}

/**
 * Removes a job file's name, then closes it: for a sealed file, never the
 * other way round (see above).
 */
export function removeJobFile(fd: number, path: string): void {
  // The launcher may have removed the job directory already.
  removeIfPresent(path);
  closeSync(fd);
}

/** A file ranks map: a sealed memory file where this process makes them, else a plain file. */
export interface JobFile {
  fd: number;
  sealed: boolean;
}

/**
 * A new file of `size` bytes for `path`: a sealed memory file, reachable at
 * `path` once published; else the plain file at `path` itself, created
 * exclusively (EEXIST when taken).
 */
export function createJobFile(path: string, size: number): JobFile {
  if (makesSealedFiles()) return { fd: createSealedFile(basename(path), size), sealed: true };
  const fd = openSync(path, 'wx+', 0o600);
  try {
    ftruncateSync(fd, size);
  } catch (error) {
    removeJobFile(fd, path);
    throw error;
  }
  return { fd, sealed: false };
}

/** Makes a sealed job file reachable at `path` (EEXIST when taken); a plain one is there already. */
export function publishJobFile(file: JobFile, path: string): void {
  if (file.sealed) linkSealedFile(file.fd, path);
}

/** Gives up a job file not published yet: a plain one is at `path` already, a sealed one is not. */
export function discardJobFile(file: JobFile, path: string): void {
  if (file.sealed) closeSync(file.fd);
  else removeJobFile(file.fd, path);
}

/**
 * Opens the job file at `path` (following a sealed file's link); undefined
 * when there is none. A link this process may not follow is an error that
 * says why, and what to do.
 */
export function openJobFile(path: string, flags: 'r' | 'r+', retried = false): number | undefined {
  try {
    return openSync(path, flags);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const target = linkAt(path);
    if (code === 'ENOENT' && target === undefined) return undefined;
    if (target === undefined) throw error;
    // Not there when opened, there when looked at: its maker published it in between. A link that
    // fails again leads nowhere.
    if (code === 'ENOENT' && !retried) return openJobFile(path, flags, true);
    throw new FileStoreError(
      `cannot open ${path}, the link to a sealed memory file of another rank (${target}): ${code}. ` +
        (code === 'ENOENT'
          ? 'Its process ended, or runs in a PID namespace this one does not see. '
          : "A process may open another's files only where it may ptrace-read it (the same user, no security " +
            'module forbidding it). ') +
        `With ${SEALED_FILES_ENV}=0 on every rank, such files are plain files of the job directory instead.`,
    );
  }
}

/** Where the symbolic link at `path` points; undefined when `path` is no link (or is gone). */
function linkAt(path: string): string | undefined {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : undefined;
  } catch {
    return undefined;
  }
}
