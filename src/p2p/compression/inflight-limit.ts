/**
 * At most `limit` operations at once (zstd's max_inflight), shared by a
 * worker's compression and decompression. A sender takes a slot only if one
 * is free (else it sends raw); a receiver waits in line, with a timeout.
 */
import { CommTimeoutError } from '../../runtime/errors.ts';

export class InflightLimit {
  readonly limit: number;
  #active = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.limit = limit;
  }

  get active(): number {
    return this.#active;
  }

  /** A slot now, or false when all are busy. */
  tryAcquire(): boolean {
    if (this.#active >= this.limit) return false;
    this.#active++;
    return true;
  }

  /** A slot once one frees up; `who` names the waiter in the timeout error. */
  acquire(timeoutMs: number, who: string): Promise<void> {
    if (this.tryAcquire()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(grant), 1);
        reject(
          new CommTimeoutError(
            `${who} waited ${timeoutMs} ms for one of ${this.limit} codec slots, all held by operations in flight`,
          ),
        );
      }, timeoutMs);
      this.#waiting.push(grant);
    });
  }

  /** Hands the slot to the next waiter, or frees it. */
  release(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#active--;
  }
}
