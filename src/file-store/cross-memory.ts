/**
 * Cross-memory attach (Linux's process_vm_readv, what Open MPI's shared-memory
 * transport calls CMA): a consumer copies a large value straight out of the
 * producer's tensor into its own memory, one copy where an arena takes two
 * (the producer's in, the consumer's out).
 *
 * A process may read another's memory when the kernel lets it ptrace it: the
 * same user, and under Yama's ptrace_scope 1 only when the target allowed it,
 * which every store of a node does (PR_SET_PTRACER_ANY: any process of the
 * user, as mpirun's ranks do). Where the call is filtered (a container's
 * seccomp profile) or Yama allows only administrators (scope 2 and above),
 * or TENSORCOMM_CMA=0, it is off and values go through the arenas.
 */
import { readFileSync } from 'node:fs';
import { koffi } from '../runtime/koffi.ts';
import { errno, hasLibc } from '../runtime/libc.ts';
import type { CopyHelper } from './copy-helper.ts';

export interface CrossMemory {
  /** Where `bytes` start in this process's memory (its backing store does not move while referenced). */
  addressOf(bytes: Uint8Array): number;
  /**
   * Copies `into.length` bytes from `address` in process `pid` into `into`, a
   * large value half by `helper`'s thread where one is given; throws naming the errno.
   */
  read(pid: number, address: number, into: Uint8Array, helper?: CopyHelper): void;
}

const PR_SET_PTRACER = 0x59616d61;
const PR_SET_PTRACER_ANY = -1;
const ERRNO_NAMES: Record<number, string> = { 1: 'EPERM', 3: 'ESRCH', 14: 'EFAULT', 38: 'ENOSYS' };

let probed: CrossMemory | undefined | null = null;

/** The bindings when this process can read peers and be read by them; undefined where it cannot. */
export function crossMemory(): CrossMemory | undefined {
  if (probed === null) probed = probe();
  return probed;
}

function probe(): CrossMemory | undefined {
  if (process.env.TENSORCOMM_CMA === '0' || !hasLibc() || yamaScope() >= 2) return undefined;
  const lib = koffi().load('libc.so.6');
  // memmove with a length of 0 copies nothing and returns its first argument: the buffer's address.
  const memmove = lib.func('uintptr_t memmove(void *dest, const void *src, size_t n)');
  koffi().struct('tensorcomm_iovec', { base: 'uintptr_t', len: 'size_t' });
  const readv = lib.func(
    'intptr_t process_vm_readv(int pid, const tensorcomm_iovec *local, unsigned long liovcnt, ' +
      'const tensorcomm_iovec *remote, unsigned long riovcnt, unsigned long flags)',
  );
  const prctl = lib.func('int prctl(int option, long arg2, long arg3, long arg4, long arg5)');
  // Without Yama the option does not exist (EINVAL), and nothing needs allowing.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  const addressOf = (bytes: Uint8Array) => Number(memmove(bytes, bytes, 0));
  const failed = (pid: number, length: number, code: number) =>
    // Words only: its one caller (ring-channels.ts) fails the get with a RankFailedError saying this.
    new Error(
      `reading ${length} bytes of process ${pid} with process_vm_readv failed ` +
        `(${ERRNO_NAMES[code] ?? `errno ${code}`}); TENSORCOMM_CMA=0 sends values through shared files instead`,
    );
  const readRange = (pid: number, remote: number, local: number, length: number) => {
    for (let done = 0; done < length; ) {
      const n = Number(
        readv(
          pid,
          { base: local + done, len: length - done },
          1,
          { base: remote + done, len: length - done },
          1,
          0,
        ),
      );
      if (n <= 0) throw failed(pid, length, errno());
      done += n;
    }
  };
  const cross: CrossMemory = {
    addressOf,
    read(pid, address, into, helper) {
      const local = addressOf(into);
      if (!helper) readRange(pid, address, local, into.length);
      else helper.read(pid, address, local, into.length, readRange, (code) => failed(pid, into.length, code));
    },
  };
  // A filtered or missing syscall shows on this process's own memory as well. (Memory of a
  // SharedArrayBuffer, as a tensor's: a small ArrayBuffer may live on V8's heap, which moves.)
  try {
    const from = new Uint8Array(new SharedArrayBuffer(64)).fill(7);
    const into = new Uint8Array(new SharedArrayBuffer(64));
    cross.read(process.pid, addressOf(from), into);
    return into[63] === 7 ? cross : undefined;
  } catch {
    return undefined;
  }
}

function yamaScope(): number {
  try {
    return Number(readFileSync('/proc/sys/kernel/yama/ptrace_scope', 'utf8').trim());
  } catch {
    // No Yama module: only the classic ptrace rules apply, as at scope 0.
    return 0;
  }
}
