/**
 * A producer's shared arenas (the design of Open MPI's vader/sm transport):
 * files in the job directory, created once, mapped shared and reused, so a
 * large value costs one copy into pages that are already allocated and mapped
 * instead of a fresh tmpfs file per value. A value takes a region of the first
 * arena with room; when none has, a new arena is added while the total stays
 * within the budget, and otherwise the caller falls back to a value file.
 * Arena files are sparse: only pages a value ever took are allocated, and
 * those are reserved (reserve-space.ts) before the value is copied in, so a
 * full file system is a ShmSpaceError, not a SIGBUS in the copy. Regions are
 * handed out first-fit from the start, so what was ever reserved is one
 * prefix of the file, and a region past it is reserved as it is first taken.
 * Arenas are sealed memory files where the system has them (sealed-files.ts):
 * then nobody can truncate one under a copy or a consumer's view.
 */
import { fstatSync } from 'node:fs';
import { FileStoreCorruptError } from './errors.ts';
import { arenaFile } from './file-names.ts';
import { canMapFiles, copyInto, type Mapping, mapFile } from './mapped-file.ts';
import { RegionAllocator } from './region-allocator.ts';
import { reserveFileSpace } from './reserve-space.ts';
import {
  createJobFile,
  discardJobFile,
  type JobFile,
  publishJobFile,
  removeJobFile,
} from './sealed-files.ts';
import type { ArenaRef } from './value-header.ts';

/** Regions start on page boundaries: copies and faults never share a page between values. */
const PAGE = 4096;

export interface ArenaLimits {
  /** Size of each new arena (a larger value gets an arena of its own size). */
  arenaBytes: number;
  /** The most arena bytes this producer creates; values beyond travel in value files. */
  maxArenaBytes: number;
}

interface Arena {
  path: string;
  /** Kept open to reserve space, to keep a sealed arena reachable, and to see a plain one truncated before a copy. */
  file: JobFile;
  size: number;
  mapping: Mapping;
  regions: RegionAllocator;
  /** Bytes from the start that are allocated in the file system. */
  reserved: number;
}

export class ProducerArenas {
  readonly #arenas: Arena[] = [];
  /** Arenas need shared mappings; without them every value travels in its file. */
  readonly #usable = canMapFiles();
  #totalBytes = 0;

  constructor(
    readonly dir: string,
    readonly rank: number,
    readonly nonce: number,
    readonly limits: ArenaLimits,
  ) {}

  /** Bytes the arenas hold allocated in the file system. */
  get reservedBytes(): number {
    let bytes = 0;
    for (const arena of this.#arenas) bytes += arena.reserved;
    return bytes;
  }

  /**
   * Copies `payload` into a free region and returns where it is, or undefined
   * when the budget has no room for it, or when taking it would allocate
   * pages in the file system and `admits` refuses that many bytes more.
   * Throws ShmSpaceError when the file system cannot hold it,
   * FileStoreCorruptError when the arena was truncated.
   */
  store(payload: Uint8Array, where: string, admits?: (growth: number) => boolean): ArenaRef | undefined {
    if (!this.#usable) return undefined;
    const bytes = payload.length;
    const pages = Math.ceil(bytes / PAGE) * PAGE;
    let index = -1;
    let offset: number | undefined;
    for (const [i, arena] of this.#arenas.entries()) {
      offset = arena.regions.allocate(bytes);
      if (offset !== undefined) {
        index = i;
        break;
      }
    }
    // A new arena's region starts its file: the growth admits is asked for here is all there is.
    let admitted = false;
    if (offset === undefined) {
      const size = Math.max(this.limits.arenaBytes, pages);
      if (this.#totalBytes + size > this.limits.maxArenaBytes || admits?.(pages) === false) return undefined;
      admitted = true;
      index = this.#arenas.length;
      this.#arenas.push(this.#create(index, size));
      this.#totalBytes += size;
      offset = this.#arenas[index].regions.allocate(bytes) as number;
    }
    const arena = this.#arenas[index];
    const end = offset + pages;
    if (!admitted && end > arena.reserved && admits?.(end - arena.reserved) === false) {
      arena.regions.free(offset);
      return undefined;
    }
    try {
      this.#assertWhole(arena);
      if (end > arena.reserved) {
        reserveFileSpace(arena.file.fd, arena.reserved, end - arena.reserved, this.dir, where);
        arena.reserved = end;
      }
      copyInto(new Uint8Array(arena.mapping.buffer, offset, bytes), payload);
    } catch (error) {
      arena.regions.free(offset);
      throw error;
    }
    return { index, offset };
  }

  /** A copy into pages past the end of a truncated file would be a SIGBUS; a sealed one cannot be truncated. */
  #assertWhole(arena: Arena): void {
    if (arena.file.sealed) return;
    const { size } = fstatSync(arena.file.fd);
    if (size < arena.size) {
      throw new FileStoreCorruptError(
        `arena file ${arena.path} is corrupt: it holds ${size} bytes, ${arena.size} expected ` +
          '(truncated by another process?)',
      );
    }
  }

  #create(index: number, size: number): Arena {
    const path = arenaFile(this.dir, this.rank, this.nonce, index);
    const file = createJobFile(path, size);
    let mapping: Mapping | undefined;
    try {
      mapping = mapFile(file.fd, size, `arena file ${path}`, true);
      publishJobFile(file, path);
    } catch (error) {
      mapping?.release();
      discardJobFile(file, path);
      throw error;
    }
    return { path, file, size, mapping, regions: new RegionAllocator(size, PAGE), reserved: 0 };
  }

  /** Makes a region reusable: call only once no consumer can read it any more. */
  free(ref: ArenaRef): void {
    this.#arenas[ref.index].regions.free(ref.offset);
  }

  /** Releases and removes every arena; consumers' own mappings stay valid. */
  close(): void {
    for (const arena of this.#arenas.splice(0)) {
      arena.mapping.release();
      removeJobFile(arena.file.fd, arena.path);
    }
    this.#totalBytes = 0;
  }
}
