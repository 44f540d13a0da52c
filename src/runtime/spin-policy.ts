/**
 * When and how a wait between processes spins before it sleeps. Spinning
 * answers in microseconds where a sleep costs a wake-up of the process on
 * both sides (the writer's system call wakes the sleeper, whose event loop
 * then takes a turn), but only while the peers are running: so only where
 * every rank of the machine has a core of its own (`enabled`), and after a
 * few spins that caught nothing (a loaded machine, a peer busy computing)
 * only now and then, to notice when spinning pays again. The file store's
 * rings and the network store's sockets share it.
 *
 * A spin lasts long enough to outlast a peer that is still running its
 * calls' cold code (a fresh job's first thousands of calls take a process
 * hundreds of microseconds each, which a spin of 0.1 ms missed, so every wait
 * slept and paid the wake-up), and past its first moments it hands the core
 * to any other thread that wants it between looks (sched_yield): the peer's
 * compiler and collector threads, or the peer itself on a loaded machine,
 * then run at once instead of waiting for the spinner's time slice to end.
 */

/** How long one wait spins at most. */
export const SPIN_MS = 1;
/** How long a spin looks without giving the core away: a warm peer answers within this. */
export const YIELD_AFTER_MS = 0.03;
/** Spins in a row that caught nothing before waits stop spinning, and how often one spins then. */
const SPIN_MISSES_TOLERATED = 4;
const SPIN_RETRY_EVERY = 64;

export interface SpinOptions {
  /** Gives this thread's core to another runnable thread, if any (libc's sched_yield). */
  yieldCore?: () => void;
  /** The clock spins are timed by, in milliseconds (performance.now by default). */
  now?: () => number;
}

export class SpinPolicy {
  readonly enabled: boolean;
  readonly #yieldCore: () => void;
  readonly #now: () => number;
  #misses = 0;
  #waitsSinceSpin = 0;

  constructor(enabled: boolean, options: SpinOptions = {}) {
    this.enabled = enabled;
    this.#yieldCore = options.yieldCore ?? (() => {});
    this.#now = options.now ?? (() => performance.now());
  }

  /** Whether the wait about to sleep should spin first. */
  pays(): boolean {
    if (!this.enabled) return false;
    return this.#misses < SPIN_MISSES_TOLERATED || ++this.#waitsSinceSpin % SPIN_RETRY_EVERY === 0;
  }

  /**
   * Runs `look` (a round of looks, cheaper than a reading of the clock)
   * until it finds what the wait waits for or `ms` passed, yielding the core
   * between rounds after the first YIELD_AFTER_MS; whether it found it, which
   * also decides whether later waits spin (see pays).
   */
  spin(look: () => boolean, ms: number): boolean {
    const started = this.#now();
    const politeFrom = started + Math.min(YIELD_AFTER_MS, ms);
    const until = started + ms;
    let caught = false;
    for (;;) {
      if (look()) {
        caught = true;
        break;
      }
      const now = this.#now();
      if (now >= until) break;
      if (now >= politeFrom) this.#yieldCore();
    }
    this.#misses = caught ? 0 : this.#misses + 1;
    return caught;
  }
}
