/**
 * Maps a file into memory (libc mmap through koffi) so a large payload is read
 * without copying it. A private mapping (a per-value file) is writable: reads
 * share the page cache, a write copies only the page it touches and never
 * reaches the file. A shared mapping (an arena, mapped once and reused) sees
 * every later write to the file, which a private one would stop doing for any
 * page it had copied. Not populated up front: tmpfs maps 16 pages per fault,
 * a populate of a private writable mapping would copy every page, and one of
 * a sparse arena would allocate all of it.
 */
import koffi from 'koffi';

const PROT_READ = 1;
const PROT_WRITE = 2;
const MAP_SHARED = 1;
const MAP_PRIVATE = 2;
const MAP_FAILED = 2n ** 64n - 1n;

interface Libc {
  mmap: (addr: null, length: number, prot: number, flags: number, fd: number, offset: number) => bigint;
  munmap: (addr: bigint, length: number) => number;
  memcpy: (target: Uint8Array, source: Uint8Array, length: number) => unknown;
}

let libc: Libc | undefined;

function bind(): Libc {
  if (!libc) {
    const lib = koffi.load('libc.so.6');
    libc = {
      mmap: lib.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)'),
      munmap: lib.func('int munmap(void *addr, size_t length)'),
      memcpy: lib.func('void *memcpy(void *dest, const void *src, size_t n)'),
    };
  }
  return libc;
}

export interface Mapping {
  /** Valid until unmap(); touching it afterwards is a crash, so only the store calls unmap. */
  buffer: ArrayBuffer;
  unmap(): void;
}

/** Whether this platform can map files (Linux with glibc). */
export function canMapFiles(): boolean {
  if (process.platform !== 'linux') return false;
  try {
    bind();
    return true;
  } catch {
    return false;
  }
}

/**
 * Copies `source` into `target` (at least as long) with libc's memcpy: V8
 * copies out of a SharedArrayBuffer, which tensors live in, with relaxed
 * atomics, measured 15-25% slower for 64 MiB. Call only where canMapFiles().
 */
export function copyInto(target: Uint8Array, source: Uint8Array): void {
  if (source.length > target.length) {
    throw new RangeError(`copyInto: ${source.length} bytes do not fit in ${target.length}`);
  }
  bind().memcpy(target, source, source.length);
}

export function mapFile(fd: number, length: number, describe: string, shared = false): Mapping {
  const { mmap, munmap } = bind();
  const address = mmap(null, length, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  if (address === MAP_FAILED) throw new Error(`mapping ${describe} failed (errno ${koffi.errno()})`);
  let mapped = true;
  return {
    buffer: koffi.view(address, length),
    unmap() {
      if (mapped) munmap(address, length);
      mapped = false;
    },
  };
}
