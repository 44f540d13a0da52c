/**
 * Why a value could not be published at its key's path: the path was taken.
 * Usually an earlier value of the key whose consumers have not finished; but
 * the job directory is a plain directory, and a file something else put
 * there (a stray copy, a planted file) must be reported as what it is, not as
 * a slow consumer.
 */
import { closeSync, openSync, type Stats, statSync } from 'node:fs';
import { heldKeyError } from '../runtime/store-bookkeeping.ts';
import { FileStoreCorruptError } from './errors.ts';
import { readValueHeader } from './value-reader.ts';

function kindOf(stat: Stats): string {
  return stat.isDirectory() ? 'a directory' : 'not a regular file';
}

/** The error for a publication refused because `path` exists; `where` names the call. */
export function occupiedKeyError(path: string, where: string): Error {
  const stranger = (what: string) =>
    new FileStoreCorruptError(
      `${where}: an unexpected file is at this key's path ${path} (${what}), not a value of a tensorcomm ` +
        'store; something other than tensorcomm wrote into the job directory (remove the file, and give ' +
        'each job a directory of its own)',
    );
  let fd: number;
  try {
    // Followed: a large value is a link to its sealed memory file (sealed-files.ts).
    const stat = statSync(path);
    if (!stat.isFile()) return stranger(kindOf(stat));
    fd = openSync(path, 'r');
  } catch (error) {
    // Gone already: it was an earlier value, withdrawn or finished since.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return heldKeyError(() => where);
    return stranger(`unreadable: ${(error as Error).message}`);
  }
  try {
    const { header } = readValueHeader(fd, 'the file');
    return heldKeyError(() => where, header.producerRank);
  } catch (error) {
    if (error instanceof FileStoreCorruptError)
      return stranger(error.message.replace(/^.*? is corrupt: /, ''));
    throw error;
  } finally {
    closeSync(fd);
  }
}
