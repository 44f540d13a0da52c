/**
 * The TensorStore of a job that spans nodes: a value for a rank of this node
 * goes through the node's own store (shared memory), a value for a rank of
 * another node through the network store, per consumer, so a group spanning
 * nodes uses both at once. Producers name their consumers (`to`) and
 * consumers their producer (`from`). A value of one consumer that names none
 * (a TensorPromise's: its future may have been handed to any rank) is put in
 * both stores, the network store offering it to whoever asks (`pull`); the
 * first to finish it wins and the other is withdrawn.
 */

import { type NetworkStats, noNetworkStats } from '../runtime/network-stats.ts';
import {
  alreadySetError,
  checkFinish,
  checkSet,
  noGetError,
  UnfinishedGets,
} from '../runtime/store-bookkeeping.ts';
import type {
  NodeDoorbells,
  NodeRegion,
  StoreEntry,
  StoreFinishOptions,
  StoreSetOptions,
  StoreWaitOptions,
  TensorStore,
} from '../runtime/tensor-store.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** How often a value of two copies looks whether one was taken. */
const CLAIM_POLL_MS = 5;
/** A wait for a value of two copies without a timeout of its own (a TensorPromise's default). */
const DEFAULT_EITHER_TIMEOUT_MS = 300_000;

export class NodeRoutedStore implements TensorStore {
  readonly rank: number;
  readonly #near: TensorStore;
  readonly #far: TensorStore;
  readonly #nodeOf: readonly string[];
  readonly #node: string;
  /** The stores each outstanding value of this rank went to, for srcWaitUntilGetFinished. */
  readonly #published = new Map<string, TensorStore[]>();
  /** Values in both stores for one consumer, who takes it from either. */
  readonly #either = new Set<string>();
  /** The store each value this rank took came from, for destFinishGet. */
  readonly #taken = new UnfinishedGets<TensorStore>();

  /** `nodeOf`: every global rank's node id; `rank`: this rank's. */
  constructor(near: TensorStore, far: TensorStore, nodeOf: readonly string[], rank: number) {
    this.rank = rank;
    this.#near = near;
    this.#far = far;
    this.#nodeOf = nodeOf;
    this.#node = nodeOf[rank];
  }

  nodeOf(rank: number): string {
    return this.#nodeOf[rank];
  }

  /** The network's bytes are the far store's: the node's own store moves none. */
  networkStats(): NetworkStats {
    return this.#far.networkStats?.() ?? noNetworkStats();
  }

  /** A region of this node's ranks only: the node's files. */
  nodeRegion(key: string, owner: number, bytes: number): NodeRegion | undefined {
    return this.#onThisNode(owner) ? this.#near.nodeRegion?.(key, owner, bytes) : undefined;
  }

  releaseNodeRegion(key: string, owner: number): void {
    if (this.#onThisNode(owner)) this.#near.releaseNodeRegion?.(key, owner);
  }

  /** The node's doorbells: those of the node's own store. */
  nodeDoorbells(): NodeDoorbells | undefined {
    return this.#near.nodeDoorbells?.();
  }

  #onThisNode(rank: number): boolean {
    return this.#nodeOf[rank] === this.#node;
  }

  async srcSet(key: string, tensor: Tensor, consumers: number, options: StoreSetOptions = {}): Promise<void> {
    const where = () => `srcSet(${JSON.stringify(key)})`;
    // Checked here, not left to the stores: a call one of them refuses must not leave the other holding the value.
    checkSet(key, tensor, consumers, options, where);
    if (this.#published.has(key)) throw alreadySetError(where);
    const to = options.to;
    if (to === undefined) {
      await this.#near.srcSet(key, tensor, consumers, options);
      if (consumers !== 1) {
        this.#published.set(key, [this.#near]);
        return;
      }
      await this.#far.srcSet(key, tensor, consumers, options);
      this.#published.set(key, [this.#near, this.#far]);
      this.#either.add(key);
      return;
    }
    const near = to.filter((r) => this.#onThisNode(r));
    const far = to.filter((r) => !this.#onThisNode(r));
    const stores: TensorStore[] = [];
    if (near.length > 0) {
      await this.#near.srcSet(key, tensor, near.length, { ...options, to: near });
      stores.push(this.#near);
    }
    if (far.length > 0) {
      await this.#far.srcSet(key, tensor, far.length, { ...options, to: far });
      stores.push(this.#far);
    }
    this.#published.set(key, stores);
  }

  async srcWaitUntilGetFinished(key: string, options?: StoreWaitOptions): Promise<void> {
    const stores = this.#published.get(key) ?? [this.#near];
    if (this.#either.delete(key)) return this.#firstFinished(key, stores, options);
    // Both halves are waited for even when one fails: each store lets go of its half either way.
    const waits = await Promise.allSettled(stores.map((s) => s.srcWaitUntilGetFinished(key, options)));
    this.#published.delete(key);
    const failed = waits.find((w) => w.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * The one consumer takes the value from either store: the one it claimed
   * it from is waited for, and the other withdraws its copy (a zero wait
   * frees it). Until a claim shows, both are looked at every few ms.
   */
  async #firstFinished(key: string, stores: TensorStore[], options?: StoreWaitOptions): Promise<void> {
    this.#published.delete(key);
    const deadline = performance.now() + (options?.timeoutMs ?? DEFAULT_EITHER_TIMEOUT_MS);
    let taken = stores.find((store) => store.claimed?.(key));
    while (!taken && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, CLAIM_POLL_MS));
      taken = stores.find((store) => store.claimed?.(key));
    }
    // Nobody took it in time: the first store's wait says so, in its words.
    const waited = taken ?? stores[0];
    const left = Math.max(0, Math.ceil(deadline - performance.now()));
    try {
      await waited.srcWaitUntilGetFinished(key, { ...options, timeoutMs: taken ? left || 1 : 0 });
    } finally {
      // The value's copies in the other stores, withdrawn: the waited store's answer is the call's.
      for (const store of stores) {
        if (store !== waited) await store.srcWaitUntilGetFinished(key, { timeoutMs: 0 }).catch(() => {});
      }
    }
  }

  destGet(key: string, options?: StoreWaitOptions): Promise<Tensor> {
    return this.destGetEntry(key, options).then((entry) => entry.tensor);
  }

  async destGetEntry(key: string, options?: StoreWaitOptions): Promise<StoreEntry> {
    const from = options?.from;
    const store = from === undefined || this.#onThisNode(from) ? this.#near : this.#far;
    const entry = await store.destGetEntry(key, options);
    this.#taken.add(key, store);
    return entry;
  }

  /** Lets go of each store's part of a value where that store copied it; true when nothing is left to wait for. */
  srcRelease(key: string): boolean {
    const stores = this.#published.get(key);
    if (!stores || this.#either.has(key)) return false;
    const left = stores.filter((store) => !store.srcRelease?.(key));
    if (left.length > 0) this.#published.set(key, left);
    else this.#published.delete(key);
    return left.length === 0;
  }

  landIn(key: string, into: Tensor, options: { from: number }): () => void {
    const store = this.#onThisNode(options.from) ? this.#near : this.#far;
    return store.landIn?.(key, into, options) ?? (() => {});
  }

  async destFinishGet(key: string, options: StoreFinishOptions = {}): Promise<void> {
    const where = () => `destFinishGet(${JSON.stringify(key)})`;
    checkFinish(options, where);
    const store = this.#taken.take(key);
    if (!store) throw noGetError(where, this.rank);
    await store.destFinishGet(key, options);
  }

  close(): void {
    this.#near.close();
    this.#far.close();
  }
}
