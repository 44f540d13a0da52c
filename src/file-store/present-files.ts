/**
 * File calls for files that another process (a peer's store, the launcher
 * removing the job directory) may have removed already: their absence is an
 * answer, not an error.
 */
import { openSync, rmdirSync, unlinkSync } from 'node:fs';

/** Opens `path` for reading and writing; undefined when it does not exist. */
export function openIfPresent(path: string): number | undefined {
  try {
    return openSync(path, 'r+');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Removes a file, or an empty directory; one already gone is fine. */
export function removeIfPresent(path: string, directory = false): void {
  try {
    if (directory) rmdirSync(path);
    else unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
