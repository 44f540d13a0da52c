/**
 * A job file that ranks map, made whole before anyone can open it: created
 * (sealed-files.ts), every page reserved (a full /dev/shm is a ShmSpaceError
 * here, never a SIGBUS later), mapped shared, filled by its maker, and only
 * then published under its name. On failure nothing is left behind.
 */
import { type Mapping, mapFile } from './mapped-file.ts';
import { reserveFileSpace } from './reserve-space.ts';
import { createJobFile, discardJobFile, publishJobFile } from './sealed-files.ts';

export interface MappedJobFile {
  mapping: Mapping;
  /** Open until the maker removes the file (removeJobFile): a sealed file is reachable only while it is. */
  fd: number;
}

/** Throws the file system's error as it is (EEXIST when `path` is taken); callers say what it means to them. */
export function createMappedJobFile(
  dir: string,
  path: string,
  bytes: number,
  /** What the file is ("ring file"), for errors. */
  kind: string,
  where: string,
  fill: (buffer: ArrayBuffer) => void = () => {},
): MappedJobFile {
  const file = createJobFile(path, bytes);
  let mapping: Mapping | undefined;
  try {
    reserveFileSpace(file.fd, 0, bytes, dir, where);
    mapping = mapFile(file.fd, bytes, `${kind} ${path}`, true);
    fill(mapping.buffer);
    publishJobFile(file, path);
  } catch (error) {
    mapping?.release();
    discardJobFile(file, path);
    throw error;
  }
  return { mapping, fd: file.fd };
}
