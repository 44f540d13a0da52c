/**
 * A job-wide abort flag as a file in the job directory. Every store of the job
 * watches the directory, so writing it wakes all their pending waits with the
 * failure. The first abort wins: it names the root cause.
 */
import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RankFailedError } from '../runtime/errors.ts';
import { ABORT_FILE, TMP_DIR } from './file-names.ts';

const MAX_ABORT_BYTES = 64 << 10;

export interface JobAbort {
  message: string;
  /** The rank whose failure ended the job, if one did. */
  failedRank?: number;
}

export function abortJob(dir: string, abort: JobAbort): void {
  const { message, failedRank } = abort;
  if (typeof message !== 'string') throw new TypeError('abortJob: message must be a string');
  if (failedRank !== undefined && (!Number.isSafeInteger(failedRank) || failedRank < 0)) {
    throw new RangeError(`abortJob: failedRank must be a non-negative integer, got ${failedRank}`);
  }
  const text = JSON.stringify({ message: message.slice(0, 16 << 10), failedRank });
  const temp = join(dir, TMP_DIR, `abort.${process.pid}.${Math.random().toString(36).slice(2)}`);
  writeFileSync(temp, text, { mode: 0o600 });
  try {
    linkSync(temp, join(dir, ABORT_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(temp);
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
