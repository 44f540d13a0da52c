/**
 * A job-wide abort flag as a file in the job directory. Every store of the job
 * watches the directory, so writing it wakes all their pending waits with the
 * failure. The first abort wins: it names the root cause.
 */
import { closeSync, linkSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RankFailedError } from '../runtime/errors.ts';
import { ABORT_FILE, TMP_DIR } from './file-names.ts';

const MAX_ABORT_BYTES = 64 << 10;

export interface JobAbort {
  message: string;
  /** The rank whose failure ended the job, if one did. */
  failedRank?: number;
}

/**
 * Records the job's abort. Never throws for the file system (the launcher
 * calls it from event handlers, where a throw would crash it): when the
 * record cannot be written (a full file system), an empty abort file still
 * ends the job, read as an abort without its message; returns false only when
 * not even that could be made (the directory is gone).
 */
export function abortJob(dir: string, abort: JobAbort): boolean {
  const { message, failedRank } = abort;
  if (typeof message !== 'string') throw new TypeError('abortJob: message must be a string');
  if (failedRank !== undefined && (!Number.isSafeInteger(failedRank) || failedRank < 0)) {
    throw new RangeError(`abortJob: failedRank must be a non-negative integer, got ${failedRank}`);
  }
  const text = JSON.stringify({ message: message.slice(0, 16 << 10), failedRank });
  const temp = join(dir, TMP_DIR, `abort.${process.pid}.${Math.random().toString(36).slice(2)}`);
  try {
    writeFileSync(temp, text, { mode: 0o600 });
    linkSync(temp, join(dir, ABORT_FILE));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return true;
    return markAborted(dir);
  } finally {
    try {
      rmSync(temp, { force: true });
    } catch {
      // A temporary file left behind goes with the job directory; the abort matters more.
    }
  }
}

/** An empty abort file takes an inode and no data block, so it can be made on a full tmpfs. */
function markAborted(dir: string): boolean {
  try {
    closeSync(openSync(join(dir, ABORT_FILE), 'wx', 0o600));
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EEXIST';
  }
}

/** The job's abort as an error to reject waits with, or undefined while the job runs. */
export function readJobAbort(dir: string): RankFailedError | undefined {
  let text: string;
  try {
    text = readFileSync(join(dir, ABORT_FILE), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  if (text.length === 0) {
    return new RankFailedError(
      `job aborted (its abort record could not be written: is the file system of ${dir} full?)`,
      undefined,
    );
  }
  if (text.length > MAX_ABORT_BYTES)
    return new RankFailedError('job aborted (oversized abort record)', undefined);
  try {
    const parsed = JSON.parse(text) as { message?: unknown; failedRank?: unknown };
    const message = typeof parsed.message === 'string' ? parsed.message : 'job aborted';
    const rank = Number.isSafeInteger(parsed.failedRank) ? (parsed.failedRank as number) : undefined;
    return new RankFailedError(message, rank);
  } catch {
    return new RankFailedError('job aborted (unreadable abort record)', undefined);
  }
}
