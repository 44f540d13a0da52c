/**
 * Wakes a rank that sleeps waiting for its rings: a named pipe per rank
 * (tmp/bell.<rank>), which its owner reads through the event loop and any
 * rank of the node writes a byte to. A wake-up costs the writer one write and
 * the sleeper one epoll return, against a directory event's dozens of
 * syscalls; writers ring only while the owner says it sleeps (RingSegment's
 * parked word), so a busy rank is never rung.
 *
 * The owner opens its pipe for reading and writing, so the pipe always has a
 * reader while the owner lives: a writer that finds none (ENXIO) knows the
 * owner closed. The owner's read does not keep the process alive; a waiter's
 * timer does.
 */
import { closeSync, constants, openSync, unlinkSync, writeSync } from 'node:fs';
import net from 'node:net';
import { errno, libc } from '../runtime/libc.ts';
import { FileStoreError } from './errors.ts';
import { TMP_DIR } from './file-names.ts';
import { removeIfPresent } from './present-files.ts';

const EEXIST = 17;
const RING = new Uint8Array([1]);

export function doorbellFile(dir: string, rank: number): string {
  return `${dir}/${TMP_DIR}/bell.${rank}`;
}

/** The owner's end: `onRing` runs (from the event loop) whenever someone rang. */
export class Doorbell {
  readonly #path: string;
  readonly #socket: net.Socket;

  constructor(dir: string, rank: number, onRing: () => void) {
    this.#path = doorbellFile(dir, rank);
    if (libc().mkfifo(this.#path, 0o600) !== 0) {
      const code = errno();
      throw new FileStoreError(
        code === EEXIST
          ? `the doorbell ${this.#path} exists: another store of rank ${rank} uses this job directory`
          : `making the doorbell ${this.#path} failed (errno ${code})`,
      );
    }
    let fd: number;
    try {
      fd = openSync(this.#path, constants.O_RDWR | constants.O_NONBLOCK);
    } catch (error) {
      unlinkSync(this.#path);
      throw error;
    }
    // Read into one small buffer of its own (Node's onread, missing from its typings), without a stream
    // chunk per ring: the bytes say nothing.
    const options = {
      fd,
      readable: true,
      writable: false,
      onread: {
        buffer: Buffer.alloc(64),
        callback: () => {
          onRing();
          return true;
        },
      },
    };
    this.#socket = new net.Socket(options as net.SocketConstructorOpts);
    // A failed read leaves the bounded poll of every wait to notice what arrived.
    this.#socket.on('error', () => {});
    this.#socket.unref();
  }

  close(): void {
    this.#socket.destroy();
    removeIfPresent(this.#path);
  }
}

/** A writer's end of one peer's doorbell, opened at the first ring. */
export class DoorbellPush {
  readonly #path: string;
  #fd: number | undefined;
  #gone = false;

  constructor(dir: string, rank: number) {
    this.#path = doorbellFile(dir, rank);
  }

  /** Wakes the owner; false when it has no reader any more (its store closed, or its process died). */
  ring(): boolean {
    if (this.#gone) return false;
    try {
      this.#fd ??= openSync(this.#path, constants.O_WRONLY | constants.O_NONBLOCK);
      writeSync(this.#fd, RING);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // A full pipe holds wake-ups the owner has not read yet: it will wake.
      if (code === 'EAGAIN') return true;
      if (code === 'ENXIO' || code === 'EPIPE' || code === 'ENOENT') {
        this.#gone = true;
        return false;
      }
      throw error;
    }
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
    this.#gone = true;
  }
}
