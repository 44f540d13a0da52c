/**
 * A second thread for large cross-memory reads (cross-memory.ts): while the
 * rank's own thread copies the first half of a value out of its producer's
 * memory, this thread copies the second half. The kernel pins and copies the
 * producer's pages one by one (about 5 GB/s here, where memcpy streams at
 * 13), and a producer waits while its consumer copies, so the core of a rank
 * whose peer is waiting would otherwise idle: measured on 2 processes of a
 * 2-core machine, a 64 MiB value took 7 ms instead of 12; two ranks reading
 * each other at once took the same time with it as without.
 *
 * One thread per process, shared by the process's stores (acquire/release),
 * started at the first large read (which copies alone), stopped when the last
 * store releases it. It copies with its own koffi, told what to copy through
 * shared words; its errors come back as errno and are thrown in the rank's
 * thread as a read of its own would throw them. A helper that has not
 * finished its half within a minute is stopped, its read fails, and reads
 * copy alone from then on.
 */
import { Worker } from 'node:worker_threads';
import { koffiEntry } from '../runtime/koffi.ts';

/** Values from this size on are split between the rank's thread and the helper. */
export const HELPED_MIN_BYTES = 4 << 20;
/** How long the rank's thread waits for the helper's half before it gives up on it. */
const FINISH_TIMEOUT_MS = 60_000;
const PAGE = 4096;

// Words shared with the thread: the request it was last given, the last it finished, its result, and ready/stop.
const REQUESTED = 0;
const FINISHED = 1;
const ERRNO = 2;
const READY = 3;
const STOP = 4;
/** READY's value where the thread could not set itself up. */
const FAILED = 2;
/** How long the last store's close waits for a thread still setting itself up to get to where it can stop. */
const SETUP_TIMEOUT_MS = 10_000;
const WORDS = 5;
// Its arguments: pid, local address, remote address, length.
const ARGS = 4;

/** The thread's code, a CommonJS script: koffi's path and the shared words come as workerData. */
const HELPER_SOURCE = `
const { workerData } = require('node:worker_threads');
const words = new Int32Array(workerData.words);
const args = new Float64Array(workerData.args);
let koffi;
let readv;
try {
  koffi = require(workerData.koffi);
  const lib = koffi.load('libc.so.6');
  koffi.struct('tensorcomm_helper_iovec', { base: 'uintptr_t', len: 'size_t' });
  readv = lib.func('intptr_t process_vm_readv(int pid, const tensorcomm_helper_iovec *local, ' +
    'unsigned long liovcnt, const tensorcomm_helper_iovec *remote, unsigned long riovcnt, unsigned long flags)');
  Atomics.store(words, ${READY}, 1);
} catch {
  Atomics.store(words, ${READY}, ${FAILED});
}
Atomics.notify(words, ${READY});
for (let seen = 0; Atomics.load(words, ${READY}) === 1; ) {
  Atomics.wait(words, ${REQUESTED}, seen);
  if (Atomics.load(words, ${STOP}) === 1) break;
  seen = Atomics.load(words, ${REQUESTED});
  const [pid, local, remote, length] = args;
  let code = 0;
  try {
    for (let done = 0; done < length; ) {
      const n = Number(readv(pid, { base: local + done, len: length - done }, 1, { base: remote + done, len: length - done }, 1, 0));
      if (n <= 0) { code = koffi.errno() || -1; break; }
      done += n;
    }
  } catch {
    code = -1;
  }
  Atomics.store(words, ${ERRNO}, code);
  Atomics.store(words, ${FINISHED}, seen);
  Atomics.notify(words, ${FINISHED});
}
`;

/** The half of a read the helper took: from byte `from` on. */
interface HelpedPart {
  from: number;
  /** Waits for the helper's half: 0 once it is in, else the errno its copy failed with. */
  finish(): number;
}

export type ReadRange = (pid: number, remote: number, local: number, length: number) => void;

export class CopyHelper {
  static #shared: CopyHelper | undefined;
  static #users = 0;
  /** Reads of this process a helper took a half of. */
  static helpedReads = 0;

  /** The process's helper, for one more store; release it when the store closes. */
  static acquire(): CopyHelper {
    CopyHelper.#users++;
    CopyHelper.#shared ??= new CopyHelper();
    return CopyHelper.#shared;
  }

  readonly #words = new Int32Array(new SharedArrayBuffer(WORDS * 4));
  readonly #args = new Float64Array(new SharedArrayBuffer(ARGS * 8));
  #worker: Worker | undefined;
  /** Set when the thread could not start or failed: reads copy alone from then on. */
  #broken = false;
  #requests = 0;

  /** Whether the thread runs, idle, and can take a half now. */
  get ready(): boolean {
    return !this.#broken && Atomics.load(this.#words, READY) === 1 && this.#idle();
  }

  #idle(): boolean {
    return Atomics.load(this.#words, FINISHED) === this.#requests;
  }

  /** Starts the thread, once; the read that asks first copies alone. */
  #start(): void {
    if (this.#worker || this.#broken) return;
    try {
      this.#worker = new Worker(HELPER_SOURCE, {
        eval: true,
        // Plain Node: none of the rank's loaders (a TypeScript loader's hooks would start threads of their own).
        execArgv: [],
        workerData: { koffi: koffiEntry(), words: this.#words.buffer, args: this.#args.buffer },
      });
    } catch {
      this.#broken = true;
      return;
    }
    // It never keeps the process alive; a thread that fails is not used again.
    this.#worker.unref();
    this.#worker.on('error', () => {
      this.#broken = true;
    });
    this.#worker.on('exit', () => {
      this.#broken = true;
    });
  }

  /**
   * Copies `length` bytes at `remote` in process `pid` to `local` in this
   * process, the second half (from a page boundary) by the helper where it is
   * ready and the value large enough, the rest by `read` on this thread;
   * throws what `read` throws, or `failed(errno)` where the helper's half failed.
   */
  read(
    pid: number,
    remote: number,
    local: number,
    length: number,
    read: ReadRange,
    failed: (errno: number) => Error,
  ): void {
    const part = length >= HELPED_MIN_BYTES ? this.#split(pid, remote, local, length) : undefined;
    if (!part) {
      read(pid, remote, local, length);
      return;
    }
    let failure: unknown;
    try {
      read(pid, remote, local, part.from);
    } catch (error) {
      failure = error;
    }
    // Its half lands in memory this read owns: the read returns only once the helper let go of it.
    const errno = part.finish();
    if (failure !== undefined) throw failure;
    if (errno !== 0) throw failed(errno);
  }

  #split(pid: number, remote: number, local: number, length: number): HelpedPart | undefined {
    if (!this.ready) {
      this.#start();
      return undefined;
    }
    const from = Math.floor(length / 2 / PAGE) * PAGE;
    this.#args.set([pid, local + from, remote + from, length - from]);
    const request = ++this.#requests;
    Atomics.store(this.#words, ERRNO, 0);
    Atomics.store(this.#words, REQUESTED, request);
    Atomics.notify(this.#words, REQUESTED);
    CopyHelper.helpedReads++;
    return {
      from,
      finish: () => {
        const deadline = performance.now() + FINISH_TIMEOUT_MS;
        for (let left = FINISH_TIMEOUT_MS; Atomics.load(this.#words, FINISHED) !== request; ) {
          if (left <= 0) {
            // Stopped, so that it cannot write into memory the failed read no longer holds.
            this.#broken = true;
            this.#worker?.terminate().catch(() => undefined);
            throw new Error(`the copy helper thread did not finish its half within ${FINISH_TIMEOUT_MS} ms`);
          }
          Atomics.wait(this.#words, FINISHED, request - 1, left);
          left = deadline - performance.now();
        }
        return Atomics.load(this.#words, ERRNO);
      },
    };
  }

  /** One store fewer; the last stops the thread. */
  release(): void {
    if (CopyHelper.#shared !== this || --CopyHelper.#users > 0) return;
    CopyHelper.#shared = undefined;
    Atomics.store(this.#words, STOP, 1);
    Atomics.add(this.#words, REQUESTED, 1);
    Atomics.notify(this.#words, REQUESTED);
    // It ends by itself, out of its loop. Stopped from outside inside a koffi call (its setup, above all),
    // koffi's error on the way out aborts the whole process; and a process that exits stops its threads.
    // So the last close waits until the thread is past its setup.
    if (this.#worker !== undefined && !this.#broken) Atomics.wait(this.#words, READY, 0, SETUP_TIMEOUT_MS);
  }
}
