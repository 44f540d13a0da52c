/**
 * State that belongs to the rank a thread runs (its monitor, clock, fault
 * injector, ledger of calls, ...). A rank thread runs one rank, so such state
 * is a plain module variable there; a thread that runs many ranks as async
 * tasks (spawnThreads' `threads: 1`) gives each task its own, carried by an
 * AsyncLocalStorage across the task's awaits, timers and callbacks. The
 * storage exists only once a thread runs a task, so rank threads pay nothing.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

type Slots = Map<RankLocal<unknown>, unknown>;

let tasks: AsyncLocalStorage<Slots> | undefined;

export class RankLocal<T> {
  readonly #initial: () => T;
  #thread: T;

  /** `initial` makes the value each rank starts with (a fresh one per task). */
  constructor(initial: () => T) {
    this.#initial = initial;
    this.#thread = initial();
  }

  get(): T {
    const slots = tasks?.getStore();
    if (slots === undefined) return this.#thread;
    if (slots.has(this)) return slots.get(this) as T;
    const value = this.#initial();
    slots.set(this, value);
    return value;
  }

  set(value: T): void {
    const slots = tasks?.getStore();
    if (slots === undefined) this.#thread = value;
    else slots.set(this, value);
  }
}

/** Runs `body` as a rank task of this thread: every RankLocal it (and all it starts) reads is its own. */
export function runAsRankTask<T>(body: () => T): T {
  tasks ??= new AsyncLocalStorage<Slots>();
  return tasks.run(new Map(), body);
}

/** Whether the code running now is a rank task (one of several ranks of this thread). */
export function inRankTask(): boolean {
  return tasks?.getStore() !== undefined;
}
