/**
 * Maps a file into memory (libc mmap through koffi) so a large payload is read
 * without copying it. A private mapping (a per-value file) is writable: reads
 * share the page cache, a write copies only the page it touches and never
 * reaches the file. A shared mapping (an arena, mapped once and reused) sees
 * every later write to the file, which a private one would stop doing for any
 * page it had copied. Not populated up front: tmpfs maps 16 pages per fault,
 * a populate of a private writable mapping would copy every page, and one of
 * a sparse arena would allocate all of it.
 *
 * A mapping never goes away under a view: release() swaps the file's pages
 * for anonymous zero pages at the same address (the file's memory is given
 * back at once), and the address range is unmapped only once its ArrayBuffer
 * is garbage-collected. A tensor kept past its get reads zeros instead of
 * faulting the process. The file's size is checked before mapping, since a
 * mapping past the end of a file faults on first touch; that a file cannot
 * shrink later is up to its kind (sealed-files.ts).
 */
import { fstatSync } from 'node:fs';
import { koffi } from '../runtime/koffi.ts';
import {
  errno,
  hasLibc,
  libc,
  MAP_ANONYMOUS,
  MAP_FAILED,
  MAP_FIXED,
  MAP_NORESERVE,
  MAP_PRIVATE,
  MAP_SHARED,
  PROT_READ,
  PROT_WRITE,
} from '../runtime/libc.ts';
import { FileStoreCorruptError, FileStoreError } from './errors.ts';

export interface Mapping {
  /** Readable for as long as anything references it, also after release(). */
  buffer: ArrayBuffer;
  /** Gives the file's pages back: from now on the buffer reads zeros. */
  release(): void;
}

interface Range {
  address: bigint;
  length: number;
}

const unmapWhenCollected = new FinalizationRegistry<Range>(({ address, length }) => {
  libc().munmap(address, length);
});

/** Whether this platform can map files (Linux with glibc). */
export function canMapFiles(): boolean {
  return hasLibc();
}

/**
 * Copies `source` into `target` (at least as long) with libc's memcpy: V8
 * copies out of a SharedArrayBuffer, which tensors live in, with relaxed
 * atomics a word at a time, where memcpy moves wide vectors. Call only where
 * canMapFiles().
 */
export function copyInto(target: Uint8Array, source: Uint8Array): void {
  if (source.length > target.length) {
    throw new RangeError(`copyInto: ${source.length} bytes do not fit in ${target.length}`);
  }
  libc().memcpy(target, source, source.length);
}

/** Maps the first `length` bytes of the file; a file shorter than that is corrupt. */
export function mapFile(fd: number, length: number, describe: string, shared = false): Mapping {
  const { size } = fstatSync(fd);
  if (size < length) {
    throw new FileStoreCorruptError(
      `${describe} is corrupt: it holds ${size} bytes, ${length} expected (truncated by another process?)`,
    );
  }
  const { mmap, mmapAt } = libc();
  const prot = PROT_READ | PROT_WRITE;
  const address = mmap(null, length, prot, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (address === MAP_FAILED) throw new FileStoreError(`mapping ${describe} failed (errno ${errno()})`);
  const buffer = koffi().view(address, length);
  unmapWhenCollected.register(buffer, { address, length });
  let released = false;
  return {
    buffer,
    release() {
      if (released) return;
      released = true;
      const flags = MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
      if (mmapAt(address, length, prot, flags, -1, 0) === MAP_FAILED) {
        throw new FileStoreError(`releasing the mapping of ${describe} failed (errno ${errno()})`);
      }
    },
  };
}
