/**
 * Writes a value file (its header, then the payload or what the payload's
 * place is) and publishes it at its key's path in one step, so no consumer
 * sees half of one and a path already taken refuses it. A file that
 * consumers map rather than read whole (over SMALL_FILE_BYTES) is a sealed
 * memory file where the system has them, linked at the path
 * (sealed-files.ts), so nobody can truncate it under their views; the
 * producer keeps it open until it removes the value. The rest are written
 * aside in tmp/ and hard-linked into place.
 */
import { closeSync, linkSync, openSync, writeSync, writevSync } from 'node:fs';
import { basename } from 'node:path';
import { occupiedKeyError } from './occupied-key.ts';
import { removeIfPresent } from './present-files.ts';
import { asSpaceError, reserveFileSpace } from './reserve-space.ts';
import { createSealedFile, linkSealedFile, makesSealedFiles } from './sealed-files.ts';
import { SMALL_FILE_BYTES } from './value-reader.ts';

/**
 * Publishes `pieces` at `path` (`temp`: where a plain file is written first);
 * returns the sealed file to close once the value is removed
 * (removeJobFile), or undefined for a plain one. Throws the errors of a
 * taken path and a full file system that say so.
 */
export function publishValueFile(
  path: string,
  temp: string,
  pieces: Uint8Array[],
  dir: string,
  where: string,
): number | undefined {
  const fileBytes = pieces.reduce((sum, piece) => sum + piece.length, 0);
  // Mapped by consumers only once fully written, so a write that finds no room is an error, not a fault. A
  // large one is reserved first all the same: the error then tells the room there was, and no half-written
  // file fills the directory meanwhile. Small ones skip the call on the hot path.
  const large = fileBytes > SMALL_FILE_BYTES;
  try {
    if (large && makesSealedFiles()) {
      const fd = createSealedFile(basename(path), fileBytes);
      try {
        reserveFileSpace(fd, 0, fileBytes, dir, where);
        writeAll(fd, pieces);
        linkSealedFile(fd, path);
      } catch (error) {
        closeSync(fd);
        throw error;
      }
      return fd;
    }
    try {
      const fd = openSync(temp, 'wx', 0o600);
      try {
        if (large) reserveFileSpace(fd, 0, fileBytes, dir, where);
        writeAll(fd, pieces);
      } finally {
        closeSync(fd);
      }
      linkSync(temp, path);
    } finally {
      removeIfPresent(temp);
    }
    return undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw occupiedKeyError(path, where);
    throw asSpaceError(error, dir, fileBytes, where);
  }
}

/** One writev for header and payload; a short write (rare on tmpfs) is finished piece by piece. */
function writeAll(fd: number, pieces: Uint8Array[]): void {
  let written = writevSync(fd, pieces);
  for (const piece of pieces) {
    const skip = Math.min(written, piece.length);
    written -= skip;
    for (let done = skip; done < piece.length; ) done += writeSync(fd, piece, done, piece.length - done);
  }
}
