/**
 * Poller: calls a check again and again without ever holding the rank's event
 * loop. GPU work usually finishes within microseconds, so the first checks
 * come as soon as the loop has run everything else (setImmediate); a wait that
 * lasts backs off to a millisecond timer, so a long collective costs little CPU.
 */

/** Checks on the immediate queue before the first timer. */
const IMMEDIATE_CHECKS = 32;
const TIMER_MS = 1;

export class Poller {
  readonly #check: () => boolean;
  #scheduled = false;
  #idleChecks = 0;

  /** `check` returns whether there is still something to wait for. */
  constructor(check: () => boolean) {
    this.#check = check;
  }

  /** Something changed: check soon, and quickly again for a while. */
  wake(): void {
    this.#idleChecks = 0;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    const run = () => {
      this.#scheduled = false;
      if (this.#check()) this.#schedule();
    };
    if (this.#idleChecks++ < IMMEDIATE_CHECKS) setImmediate(run);
    else setTimeout(run, TIMER_MS);
  }
}
