/**
 * The few libc functions tensorcomm calls through koffi (Linux with glibc):
 * for the file store, mapping files, copying into mappings, reserving file
 * space, making the pipes that wake a parked rank; for the network store,
 * reading and writing a socket without waiting; for thread ranks that outnumber the
 * cores, giving the core away. All are called synchronously; none blocks
 * for long.
 */
import { koffi } from './koffi.ts';

export interface Libc {
  mmap: (addr: null, length: number, prot: number, flags: number, fd: number, offset: number) => bigint;
  /** mmap at a fixed address: replaces what is mapped there. */
  mmapAt: (addr: bigint, length: number, prot: number, flags: number, fd: number, offset: number) => bigint;
  munmap: (addr: bigint, length: number) => number;
  memcpy: (target: Uint8Array, source: Uint8Array, length: number) => unknown;
  /** Returns the error number itself (0 on success), unlike most libc calls. */
  posixFallocate: (fd: number, offset: number, length: number) => number;
  /** Makes a named pipe (a ring store's doorbell); 0 on success, else -1 and errno. */
  mkfifo: (path: string, mode: number) => number;
  /** Reads what a socket holds, up to `length` bytes; -1 and errno EAGAIN when it holds nothing (with MSG_DONTWAIT). */
  recv: (fd: number, into: Uint8Array, length: number, flags: number) => bigint | number;
  /** Writes what a socket takes now, up to `length` bytes; -1 and errno EAGAIN when it takes nothing (with MSG_DONTWAIT). */
  send: (fd: number, bytes: Uint8Array, length: number, flags: number) => bigint | number;
  /** Gives the calling thread's core to another runnable thread, if any; returns at once otherwise. */
  schedYield: () => number;
}

export const PROT_READ = 1;
export const PROT_WRITE = 2;
export const MAP_SHARED = 0x01;
export const MAP_PRIVATE = 0x02;
export const MAP_FIXED = 0x10;
export const MAP_ANONYMOUS = 0x20;
export const MAP_NORESERVE = 0x4000;
export const MAP_FAILED = 2n ** 64n - 1n;
export const MSG_DONTWAIT = 0x40;
/** A write to a socket whose peer is gone fails with EPIPE instead of raising SIGPIPE. */
export const MSG_NOSIGNAL = 0x4000;

let bound: Libc | undefined;

/** The bindings; throws where libc cannot be loaded (see hasLibc). */
export function libc(): Libc {
  if (!bound) {
    const lib = koffi().load('libc.so.6');
    bound = {
      mmap: lib.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)'),
      mmapAt: lib.func(
        'void *mmap(uintptr_t addr, size_t length, int prot, int flags, int fd, int64_t offset)',
      ),
      munmap: lib.func('int munmap(uintptr_t addr, size_t length)'),
      memcpy: lib.func('void *memcpy(void *dest, const void *src, size_t n)'),
      posixFallocate: lib.func('int posix_fallocate(int fd, int64_t offset, int64_t len)'),
      mkfifo: lib.func('int mkfifo(const char *path, uint32_t mode)'),
      recv: lib.func('intptr_t recv(int fd, void *buf, size_t len, int flags)'),
      send: lib.func('intptr_t send(int fd, const void *buf, size_t len, int flags)'),
      schedYield: lib.func('int sched_yield()'),
    };
  }
  return bound;
}

/** Whether this platform has the bindings (Linux with glibc). */
export function hasLibc(): boolean {
  if (process.platform !== 'linux') return false;
  try {
    libc();
    return true;
  } catch {
    // Not glibc (musl has no libc.so.6), or no koffi build here: callers then go without libc.
    return false;
  }
}

let coreYielder: (() => number) | null | undefined;

/** libc's sched_yield, which gives this thread's core to another runnable thread; null without libc. */
export function schedYield(): (() => number) | null {
  if (coreYielder === undefined) coreYielder = hasLibc() ? libc().schedYield : null;
  return coreYielder;
}

export function errno(): number {
  return koffi().errno();
}
