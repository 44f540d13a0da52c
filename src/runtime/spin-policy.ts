/**
 * When a wait between processes spins before it sleeps. Spinning answers in
 * microseconds where a sleep costs a wake-up of the process on both sides
 * (the writer's system call wakes the sleeper), but only while the peers
 * are running: so only where every rank of the machine has a core of its own
 * (`enabled`), and after a few spins that caught nothing (a loaded machine,
 * a peer busy computing) only now and then, to notice when spinning pays
 * again. The file store's rings and the network store's sockets share it.
 */

/** How long one wait spins. */
export const SPIN_MS = 0.1;
/** Spins in a row that caught nothing before waits stop spinning, and how often one spins then. */
const SPIN_MISSES_TOLERATED = 4;
const SPIN_RETRY_EVERY = 64;

export class SpinPolicy {
  readonly enabled: boolean;
  #misses = 0;
  #waitsSinceSpin = 0;

  constructor(enabled: boolean) {
    this.enabled = enabled;
  }

  /** Whether the wait about to sleep should spin first. */
  pays(): boolean {
    if (!this.enabled) return false;
    return this.#misses < SPIN_MISSES_TOLERATED || ++this.#waitsSinceSpin % SPIN_RETRY_EVERY === 0;
  }

  /** What a spin that `pays` allowed came to: whether it caught what it waited for. */
  spun(caught: boolean): void {
    this.#misses = caught ? 0 : this.#misses + 1;
  }
}
