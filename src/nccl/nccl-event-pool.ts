/**
 * EventPool: CUDA events reused from call to call, so a loop of collectives
 * creates only as many events as it has calls in flight at once.
 */

import type { CudaRuntime, EventHandle } from '../cuda/api.ts';
import { runAll } from '../runtime/run-all.ts';

export class EventPool {
  readonly #cuda: CudaRuntime;
  readonly #free: EventHandle[] = [];
  /** Every event this pool created, lent or not: all are destroyed with the pool. */
  readonly #created = new Set<EventHandle>();

  constructor(cuda: CudaRuntime) {
    this.#cuda = cuda;
  }

  take(): EventHandle {
    const event = this.#free.pop();
    if (event !== undefined) return event;
    const created = this.#cuda.eventCreate();
    this.#created.add(created);
    return created;
  }

  /** Back for reuse; only once nothing will query or wait on it again. */
  give(event: EventHandle): void {
    this.#free.push(event);
  }

  /** Destroys every event, including those still lent (work on an aborted communicator keeps its events). */
  destroy(): void {
    const events = [...this.#created];
    this.#created.clear();
    this.#free.length = 0;
    runAll(events.map((event) => () => this.#cuda.eventDestroy(event)));
  }
}
