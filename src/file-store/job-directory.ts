/**
 * One directory per job under a shared root: TENSORCOMM_SHM_DIR when set,
 * else /dev/shm when it exists (tmpfs keeps values in memory), else the
 * temporary directory. The name carries the launcher's pid and the job id,
 * so a later launcher can tell a dead job's directory from a live one.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { FileStoreError } from './errors.ts';
import { TMP_DIR } from './file-names.ts';

const PREFIX = 'tensorcomm-job-';
const JOB_ID = /^[A-Za-z0-9_-]{1,64}$/;
const NAME = /^tensorcomm-job-(\d+)-([A-Za-z0-9_-]{1,64})$/;

export interface JobDirectoryOptions {
  /** Letters, digits, '_' and '-', at most 64. */
  jobId: string;
  /** Default: defaultStoreRoot(). */
  root?: string;
  /** The launcher's pid, recorded in the name (default: this process). */
  pid?: number;
}

export interface JobDirectoryInfo {
  pid: number;
  jobId: string;
}

/** Where job directories go unless told otherwise; a small /dev/shm (Docker's 64 MiB) is the usual reason to move them. */
export const SHM_DIR_ENV = 'TENSORCOMM_SHM_DIR';

export function defaultStoreRoot(): string {
  const chosen = process.env[SHM_DIR_ENV];
  if (chosen !== undefined && chosen !== '') {
    if (!statSync(chosen, { throwIfNoEntry: false })?.isDirectory()) {
      throw new FileStoreError(
        `${SHM_DIR_ENV}=${chosen} is not a directory; create it or unset ${SHM_DIR_ENV}`,
      );
    }
    return resolve(chosen);
  }
  return existsSync('/dev/shm') && statSync('/dev/shm').isDirectory() ? '/dev/shm' : tmpdir();
}

export function jobDirectoryInfo(dir: string): JobDirectoryInfo | undefined {
  const match = NAME.exec(basename(dir));
  return match ? { pid: Number(match[1]), jobId: match[2] } : undefined;
}

/** Creates (or adopts) the job's directory, mode 0700 and owned by this user. */
export function createJobDirectory(options: JobDirectoryOptions): string {
  const { jobId, root = defaultStoreRoot(), pid = process.pid } = options;
  if (typeof jobId !== 'string' || !JOB_ID.test(jobId)) {
    throw new TypeError(
      `createJobDirectory: jobId must be 1..64 letters, digits, '_' or '-', got ${JSON.stringify(jobId)}`,
    );
  }
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new RangeError(`createJobDirectory: pid must be a positive integer, got ${pid}`);
  }
  const dir = join(root, `${PREFIX}${pid}-${jobId}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  assertPrivate(dir);
  mkdirSync(join(dir, TMP_DIR), { recursive: true, mode: 0o700 });
  return dir;
}

/** Other users must not read or plant values: refuse a directory anyone else could touch. */
function assertPrivate(dir: string): void {
  const stat = lstatSync(dir);
  if (!stat.isDirectory())
    throw new FileStoreError(`createJobDirectory: ${dir} exists and is not a directory`);
  const mode = stat.mode & 0o777;
  if (mode !== 0o700) {
    throw new FileStoreError(`createJobDirectory: ${dir} has mode 0${mode.toString(8)}, expected 0700`);
  }
  if (process.getuid && stat.uid !== process.getuid()) {
    throw new FileStoreError(`createJobDirectory: ${dir} is owned by uid ${stat.uid}, not by this user`);
  }
}

/** Removes a job directory and everything in it; nothing happens if it is already gone. */
export function removeJobDirectory(dir: string): void {
  if (!jobDirectoryInfo(dir)) {
    throw new FileStoreError(
      `removeJobDirectory: ${dir} is not a tensorcomm job directory (${PREFIX}<pid>-<jobId>)`,
    );
  }
  rmSync(dir, { recursive: true, force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes this user's job directories under `root` whose launcher is no longer
 * running (a launcher killed before it could clean up), and returns them.
 */
export function cleanupStaleJobDirectories(root: string = defaultStoreRoot()): string[] {
  const removed: string[] = [];
  const uid = process.getuid?.();
  for (const name of readdirSync(root)) {
    const info = jobDirectoryInfo(name);
    if (!info || isAlive(info.pid)) continue;
    const dir = join(root, name);
    try {
      const stat = lstatSync(dir);
      if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Removed concurrently by another launcher: nothing left to do.
    }
  }
  return removed;
}
