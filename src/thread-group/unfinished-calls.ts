/**
 * The collectives a rank started on a group that have not settled: what a
 * barrier waits for before it meets its peers, so that it implies the
 * earlier work is done (gloo's barrier waits for queued collectives the same
 * way). Sends and receives are not among them.
 */
import { CommTimeoutError } from '../runtime/errors.ts';
import { removeItem } from '../runtime/remove-item.ts';

const NONE: readonly Promise<unknown>[] = Object.freeze([]);

export class UnfinishedCalls {
  /** An array: a Set allocates as it shrinks. */
  readonly #running: Promise<unknown>[] = [];

  /** Keeps a collective the backend started until it settles. */
  add(running: Promise<unknown>): void {
    this.#running.push(running);
    running.then(
      () => this.#settled(running),
      () => this.#settled(running),
    );
  }

  /** Those running now, as they are now (later ones are not waited for). */
  current(): readonly Promise<unknown>[] {
    return this.#running.length > 0 ? this.#running.slice() : NONE;
  }

  #settled(running: Promise<unknown>): void {
    removeItem(this.#running, running);
  }
}

/** Resolves once every one of `pending` settled, fulfilled or rejected; a CommTimeoutError past `timeoutMs`. */
export async function settledWithin(
  pending: readonly Promise<unknown>[],
  timeoutMs: number,
  describe: () => string,
): Promise<void> {
  if (pending.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CommTimeoutError(describe())), timeoutMs);
  });
  try {
    await Promise.race([Promise.allSettled(pending), expired]);
  } finally {
    clearTimeout(timer);
  }
}
