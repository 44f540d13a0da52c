/**
 * The TensorStore of a job that spans nodes: a value for a rank of this node
 * goes through the node's own store (shared memory), a value for a rank of
 * another node through the network store, per consumer, so a group spanning
 * nodes uses both at once. Producers name their consumers (`to`) and
 * consumers their producer (`from`); a value that names neither is for this
 * node only (a TensorPromise's value, whose holder is not known yet).
 */
import { CommTimeoutError } from '../runtime/errors.ts';
import type {
  StoreEntry,
  StoreFinishOptions,
  StoreSetOptions,
  StoreWaitOptions,
  TensorStore,
} from '../runtime/tensor-store.ts';
import type { Tensor } from '../tensor/tensor.ts';

export class NodeRoutedStore implements TensorStore {
  readonly #near: TensorStore;
  readonly #far: TensorStore;
  readonly #onThisNode: (rank: number) => boolean;
  /** The stores each outstanding value of this rank went to, for srcWaitUntilGetFinished. */
  readonly #published = new Map<string, TensorStore[]>();
  /** The store each value this rank took came from, for destFinishGet. */
  readonly #taken = new Map<string, TensorStore>();

  constructor(near: TensorStore, far: TensorStore, onThisNode: (rank: number) => boolean) {
    this.#near = near;
    this.#far = far;
    this.#onThisNode = onThisNode;
  }

  async srcSet(key: string, tensor: Tensor, consumers: number, options: StoreSetOptions = {}): Promise<void> {
    const to = options.to;
    if (to === undefined) {
      await this.#near.srcSet(key, tensor, consumers, options);
      this.#published.set(key, [this.#near]);
      return;
    }
    if (to.length !== consumers) {
      throw new RangeError(`srcSet("${key}"): ${consumers} consumers but ${to.length} ranks in \`to\``);
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
    // Both halves are waited for even when one fails, so neither is left holding the value.
    const waits = await Promise.allSettled(stores.map((s) => s.srcWaitUntilGetFinished(key, options)));
    const failed = waits.find((w) => w.status === 'rejected');
    // A zero wait that found readers still reading leaves the value published.
    if (!failed || !(failed.reason instanceof CommTimeoutError)) this.#published.delete(key);
    if (failed) throw failed.reason;
  }

  destGet(key: string, options?: StoreWaitOptions): Promise<Tensor> {
    return this.destGetEntry(key, options).then((entry) => entry.tensor);
  }

  async destGetEntry(key: string, options?: StoreWaitOptions): Promise<StoreEntry> {
    const from = options?.from;
    const store = from === undefined || this.#onThisNode(from) ? this.#near : this.#far;
    const entry = await store.destGetEntry(key, options);
    this.#taken.set(key, store);
    return entry;
  }

  async destFinishGet(key: string, options?: StoreFinishOptions): Promise<void> {
    const store = this.#taken.get(key) ?? this.#near;
    this.#taken.delete(key);
    await store.destFinishGet(key, options);
  }

  close(): void {
    this.#near.close();
    this.#far.close();
  }
}
