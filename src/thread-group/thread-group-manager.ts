/**
 * ThreadGroupManager: one group per device combination (its members and their
 * devices, canonicalised), shared by every caller that asks for it, and
 * destroyed in sorted key order so every rank tears down in the same order.
 */
import { runAll } from '../runtime/run-all.ts';
import type { Device } from '../tensor/dtype.ts';
import { checkMembers } from './group-id.ts';
import type { ThreadGroup } from './thread-group.ts';

/** `from` and `to` are set for a direction group (getDirectionGroup). */
export type GroupFactory = (
  members: readonly number[],
  key: string,
  direction?: { from: number; to: number },
) => ThreadGroup;

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

  /** @internal The rank's context makes the one manager (ctx.manager). */
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
    return this.#cached(key, () =>
      this.#create(checkMembers(ranks, this.#devices.length, 'ThreadGroupManager'), key),
    );
  }

  /**
   * The two-member group that carries one direction of point-to-point
   * traffic, `from` → `to` (the GPU tensors of p2p messages). On GPUs each
   * direction then has its own communicator and stream, so messages keep
   * their order and the two directions never wait for each other. Only the
   * two ranks create it; its key, e.g. `0@cuda:0,1@cuda:1:0>1`, sorts with
   * the rest in destroyAll().
   */
  getDirectionGroup(from: number, to: number): ThreadGroup {
    const where = 'ThreadGroupManager.getDirectionGroup';
    const members = checkMembers([from, to], this.#devices.length, where);
    const key = `${this.keyOf(members)}:${from}>${to}`;
    return this.#cached(key, () => this.#create(members, key, { from, to }));
  }

  #cached(key: string, create: () => ThreadGroup): ThreadGroup {
    let group = this.#groups.get(key);
    if (!group || group.destroyed) {
      group = create();
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
