/**
 * ThreadGroupManager: one group per device combination (its members and their
 * devices, canonicalised), shared by every caller that asks for it, and
 * destroyed in sorted key order so every rank tears down in the same order.
 */
import { runAll } from '../runtime/run-all.ts';
import type { Device } from '../tensor/dtype.ts';
import { checkMembers } from './group-id.ts';
import type { ThreadGroup } from './thread-group.ts';

export type GroupFactory = (members: readonly number[], key: string) => ThreadGroup;

/** Orders keys by their member ranks numerically, then by the key text. */
function compareKeys(a: string, b: string): number {
  const ra = a.split(',').map((m) => Number.parseInt(m, 10));
  const rb = b.split(',').map((m) => Number.parseInt(m, 10));
  for (let i = 0; i < Math.min(ra.length, rb.length); i++) if (ra[i] !== rb[i]) return ra[i] - rb[i];
  return ra.length - rb.length || (a < b ? -1 : a > b ? 1 : 0);
}

export class ThreadGroupManager {
  readonly #devices: readonly Device[];
  readonly #create: GroupFactory;
  readonly #groups = new Map<string, ThreadGroup>();
  #destroyOrder: string[] = [];

  constructor(devices: readonly Device[], create: GroupFactory) {
    this.#devices = devices;
    this.#create = create;
  }

  /** Canonical key of a member set: sorted global ranks with their devices, e.g. `0@cpu,2@cuda:0`. */
  keyOf(ranks: readonly number[]): string {
    return checkMembers(ranks, this.#devices.length, 'ThreadGroupManager')
      .map((r) => `${r}@${this.#devices[r]}`)
      .join(',');
  }

  /** The group for these members, created on first request and shared afterwards. */
  getGroup(ranks: readonly number[]): ThreadGroup {
    const key = this.keyOf(ranks);
    let group = this.#groups.get(key);
    if (!group || group.destroyed) {
      group = this.#create(checkMembers(ranks, this.#devices.length, 'ThreadGroupManager'), key);
      this.#groups.set(key, group);
    }
    return group;
  }

  /** Keys of the live groups, in the order destroyAll() would destroy them. */
  keys(): string[] {
    return [...this.#groups.keys()].sort(compareKeys);
  }

  /**
   * Destroys every cached group in sorted key order, the same on every rank
   * (NCCL communicators torn down in different orders can deadlock); returns
   * (and remembers) that order. A group that fails to tear down does not stop
   * the others; the first failure is thrown at the end.
   */
  destroyAll(): string[] {
    const order = this.keys();
    const groups = order.map((key) => this.#groups.get(key)!);
    this.#groups.clear();
    this.#destroyOrder = order;
    runAll(groups.map((group) => () => group.destroy()));
    return order;
  }

  /** The order of the last destroyAll(), so tests and tools can check it. */
  get lastDestroyOrder(): readonly string[] {
    return this.#destroyOrder;
  }
}
