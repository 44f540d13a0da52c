/**
 * A consumer's mappings of producers' arenas: each arena file is mapped once,
 * shared, and kept until close, so a value in an arena costs no mmap and,
 * once its pages were touched, no page fault. An arena file never changes
 * size or identity under its name (a producer adds arenas under new names),
 * so a cached mapping stays right for every later value in it. A sealed
 * arena (sealed-files.ts) cannot be truncated: its descriptor is closed once
 * mapped. A plain one (where sealing is unavailable) can be, by another
 * process: its descriptor stays open and its size is checked (one fstat)
 * before every view, since a read past the end of a mapped file is a SIGBUS.
 * The mapping is writable, so a consumer that writes into a view it was
 * handed does not crash; like a view from the in-memory store, such a write is
 * seen by the value's other consumers (unlike a private mapping, which would
 * keep its copied page and show stale bytes for every later value there).
 */
import { closeSync, fstatSync } from 'node:fs';
import { FileStoreCorruptError } from './errors.ts';
import { type Mapping, mapFile } from './mapped-file.ts';
import { isSealed, openJobFile } from './sealed-files.ts';

interface MappedArena {
  /** Open only for a plain arena, whose size may change. */
  fd: number | undefined;
  mapping: Mapping;
  size: number;
}

export class ArenaViews {
  readonly #arenas = new Map<string, MappedArena>();

  /**
   * The `length` bytes at `offset` of the arena at `path`; undefined when the
   * file does not exist (its producer closed). `describe` names the value.
   */
  view(path: string, offset: number, length: number, describe: string): ArrayBuffer | undefined {
    const arena = this.#arenas.get(path) ?? this.#map(path, describe);
    if (!arena) return undefined;
    if (offset + length > arena.size) {
      throw new FileStoreCorruptError(
        `${describe} is corrupt: its payload at bytes ${offset}..${offset + length} lies outside ` +
          `arena file ${path} of ${arena.size} bytes`,
      );
    }
    const size = arena.fd === undefined ? arena.size : fstatSync(arena.fd).size;
    if (size < arena.size) {
      throw new FileStoreCorruptError(
        `${describe} is corrupt: its arena file ${path} holds ${size} bytes, ${arena.size} expected ` +
          '(truncated by another process?)',
      );
    }
    return arena.mapping.buffer;
  }

  #map(path: string, describe: string): MappedArena | undefined {
    const fd = openJobFile(path, 'r+');
    if (fd === undefined) return undefined;
    let arena: MappedArena | undefined;
    try {
      const { size } = fstatSync(fd);
      if (size === 0) throw new FileStoreCorruptError(`${describe} is corrupt: arena file ${path} is empty`);
      const plain = !isSealed(fd);
      arena = { fd: plain ? fd : undefined, mapping: mapFile(fd, size, `arena file ${path}`, true), size };
    } finally {
      if (arena?.fd === undefined) closeSync(fd);
    }
    this.#arenas.set(path, arena);
    return arena;
  }

  /** Views handed out stay readable (they read zeros from now on); see mapped-file.ts. */
  close(): void {
    for (const arena of this.#arenas.values()) {
      arena.mapping.release();
      if (arena.fd !== undefined) closeSync(arena.fd);
    }
    this.#arenas.clear();
  }
}
