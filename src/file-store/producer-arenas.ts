/**
 * A producer's shared arenas (the design of Open MPI's vader/sm transport):
 * files in the job directory, created once, mapped shared and reused, so a
 * large value costs one copy into pages that are already allocated and mapped
 * instead of a fresh tmpfs file per value. A value takes a region of the first
 * arena with room; when none has, a new arena is added while the total stays
 * within the budget, and otherwise the caller falls back to a value file.
 * Arena files are sparse: only pages a value ever touched use memory.
 */
import { closeSync, ftruncateSync, openSync, unlinkSync } from 'node:fs';
import { arenaFile } from './file-names.ts';
import { canMapFiles, copyInto, type Mapping, mapFile } from './mapped-file.ts';
import { RegionAllocator } from './region-allocator.ts';
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
  mapping: Mapping;
  regions: RegionAllocator;
}

export interface Placement extends ArenaRef {
  /** Copies the payload into the region (valid until the region is freed). */
  write(payload: Uint8Array): void;
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

  /** A region for `bytes`, or undefined when the budget has no room for it. */
  place(bytes: number): Placement | undefined {
    if (!this.#usable) return undefined;
    for (const [index, arena] of this.#arenas.entries()) {
      const offset = arena.regions.allocate(bytes);
      if (offset !== undefined) return this.#placement(index, offset, bytes);
    }
    const size = Math.max(this.limits.arenaBytes, Math.ceil(bytes / PAGE) * PAGE);
    if (this.#totalBytes + size > this.limits.maxArenaBytes) return undefined;
    const index = this.#arenas.length;
    this.#arenas.push(this.#create(index, size));
    this.#totalBytes += size;
    return this.#placement(index, this.#arenas[index].regions.allocate(bytes) as number, bytes);
  }

  #placement(index: number, offset: number, bytes: number): Placement {
    const target = new Uint8Array(this.#arenas[index].mapping.buffer, offset, bytes);
    return { index, offset, write: (payload) => copyInto(target, payload) };
  }

  #create(index: number, size: number): Arena {
    const path = arenaFile(this.dir, this.rank, this.nonce, index);
    const fd = openSync(path, 'wx+', 0o600);
    try {
      ftruncateSync(fd, size);
      return {
        path,
        mapping: mapFile(fd, size, `arena file ${path}`, true),
        regions: new RegionAllocator(size, PAGE),
      };
    } catch (error) {
      unlinkSync(path);
      throw error;
    } finally {
      // The mapping keeps the file's pages; the descriptor is not needed any more.
      closeSync(fd);
    }
  }

  /** Makes a region reusable: call only once no consumer can read it any more. */
  free(ref: ArenaRef): void {
    this.#arenas[ref.index].regions.free(ref.offset);
  }

  /** Unmaps and removes every arena; consumers' own mappings stay valid. */
  close(): void {
    for (const arena of this.#arenas.splice(0)) {
      arena.mapping.unmap();
      try {
        unlinkSync(arena.path);
      } catch (error) {
        // The job directory may already be gone (removed by the launcher).
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    this.#totalBytes = 0;
  }
}
