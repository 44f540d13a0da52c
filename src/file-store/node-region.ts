/**
 * The files behind FileTensorStore.nodeRegion: small regions that one rank
 * of a node makes and writes, and the node's other ranks map (to read it,
 * and to write words of their own into it where its layout gives them some),
 * one file per key and owner in the job directory's tmp/, which no store
 * watches. A peer finds the file only once it is whole (mapped-job-file.ts);
 * a plain file shorter than the region is taken as not there yet.
 */
import { closeSync, fstatSync } from 'node:fs';
import { TMP_DIR } from './file-names.ts';
import { type Mapping, mapFile } from './mapped-file.ts';
import { createMappedJobFile } from './mapped-job-file.ts';
import { asSpaceError } from './reserve-space.ts';
import { openJobFile, removeJobFile } from './sealed-files.ts';

const KIND = 'region file';

export class NodeRegionFile {
  readonly mapping: Mapping;
  /** The owner's file, open until close: a sealed one is reachable only while it is. */
  readonly #owned: { path: string; fd: number } | undefined;

  private constructor(mapping: Mapping, owned: { path: string; fd: number } | undefined) {
    this.mapping = mapping;
    this.#owned = owned;
  }

  static path(dir: string, topic: string, owner: number): string {
    return `${dir}/${TMP_DIR}/region.${topic}.${owner}`;
  }

  /** The owner's region of `bytes` at `path`, zero-filled, made now. */
  static create(dir: string, path: string, bytes: number): NodeRegionFile {
    const where = `creating ${path}`;
    try {
      const { mapping, fd } = createMappedJobFile(dir, path, bytes, KIND, where);
      return new NodeRegionFile(mapping, { path, fd });
    } catch (error) {
      throw asSpaceError(error, dir, bytes, where);
    }
  }

  /** A peer's region at `path`, mapped; undefined while its owner has not made it. */
  static open(path: string, bytes: number): NodeRegionFile | undefined {
    const fd = openJobFile(path, 'r+');
    if (fd === undefined) return undefined;
    try {
      if (fstatSync(fd).size < bytes) return undefined;
      return new NodeRegionFile(mapFile(fd, bytes, `${KIND} ${path}`, true), undefined);
    } finally {
      closeSync(fd);
    }
  }

  /** Unmaps (a late access reads zeros, see mapped-file.ts) and, for the owner, removes the file. */
  close(): void {
    this.mapping.release();
    if (this.#owned) removeJobFile(this.#owned.fd, this.#owned.path);
  }
}
