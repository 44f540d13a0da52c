/**
 * File calls for files that another process (a peer's store, the launcher
 * removing the job directory) may have removed already: their absence is an
 * answer, not an error.
 */
import { fstatSync, rmdirSync, statSync, unlinkSync } from 'node:fs';

/** Removes a file, or an empty directory; one already gone is fine. */
export function removeIfPresent(path: string, directory = false): void {
  try {
    if (directory) rmdirSync(path);
    else unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * Whether `path` still names the file open as `fd` (opened from it). Inode
 * numbers, not link counts, since a sealed memory file reached through a
 * link (sealed-files.ts) has none; neither inode can be reused while `fd`
 * holds one of them open.
 */
export function isStillAt(path: string, fd: number): boolean {
  const now = statSync(path, { throwIfNoEntry: false });
  if (!now) return false;
  const opened = fstatSync(fd);
  return now.ino === opened.ino && now.dev === opened.dev;
}
