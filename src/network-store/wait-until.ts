/**
 * How every wait of the network store blocks: nothing polls. A wait looks,
 * and if what it waits for is not there yet, subscribes to a topic and looks
 * again each time the topic is woken, until it finds it, its look throws (the
 * peer failed, the store closed) or its timeout passes. The timer is ref'd,
 * so a pending wait keeps the process alive, and cleared when the wait ends.
 */

/** setTimeout's ceiling; a longer delay would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class Wakers {
  readonly #byTopic = new Map<string, Set<() => void>>();

  subscribe(topic: string, wake: () => void): () => void {
    let set = this.#byTopic.get(topic);
    if (!set) this.#byTopic.set(topic, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.#byTopic.get(topic) === set) this.#byTopic.delete(topic);
    };
  }

  wake(topic: string): void {
    const set = this.#byTopic.get(topic);
    if (set) for (const wake of [...set]) wake();
  }

  wakeAll(): void {
    for (const set of [...this.#byTopic.values()]) for (const wake of [...set]) wake();
  }
}

/**
 * Resolves to the first result of `look` that is not undefined; rejects with
 * what `look` throws, or with `timedOut()` after `timeoutMs` (0 looks once).
 */
export function waitUntil<T>(
  look: () => T | undefined,
  wakers: Wakers,
  topic: string,
  timeoutMs: number,
  timedOut: () => Error,
): Promise<T> {
  try {
    const found = look();
    if (found !== undefined) return Promise.resolve(found);
  } catch (error) {
    return Promise.reject(error);
  }
  if (timeoutMs === 0) return Promise.reject(timedOut());
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const settle = (done: () => void) => {
      settled = true;
      clearTimeout(timer);
      unsubscribe();
      done();
    };
    const timer = setTimeout(() => settle(() => reject(timedOut())), Math.min(timeoutMs, MAX_TIMER_MS));
    const unsubscribe = wakers.subscribe(topic, () => {
      // A wake already under way when this wait ended must not take a second value.
      if (settled) return;
      let found: T | undefined;
      try {
        found = look();
      } catch (error) {
        return settle(() => reject(error));
      }
      if (found !== undefined) settle(() => resolve(found));
    });
  });
}
