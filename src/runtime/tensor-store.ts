/**
 * TensorStore: the four-step handshake that is the only synchronisation
 * contract between ranks (docs/design.md decision 2). A producer publishes a tensor
 * under a key for a number of consumers; each consumer gets a view (zero-copy
 * where the medium allows), reads it, and says it finished; the producer may
 * touch the tensor again only after srcWaitUntilGetFinished returns. Keys are
 * reusable once finished. What every store keeps alike (argument checks and
 * their words, finishes and failures, unfinished gets) is store-bookkeeping.ts;
 * test/store-contract/ holds every store to this contract.
 */
import type { Tensor } from '../tensor/tensor.ts';
import type { AbortWord, JobStop } from './abort-word.ts';
import type { NetworkStats } from './network-stats.ts';

export interface StoreWaitOptions {
  /** How long to wait (default: the store's); 0 looks once, so a get of a value not yet set claims nothing. */
  timeoutMs?: number;
  /**
   * The global rank of the producer. A store that spans nodes needs it to know
   * where the value comes from (NetworkTensorStore, the node-routed store);
   * stores of one node ignore it.
   */
  from?: number;
  /**
   * The producer named no consumers (srcSet without `to`, as a TensorPromise
   * does): a store spanning nodes asks it for the value.
   */
  pull?: boolean;
}

export interface StoreSetOptions {
  /** A short description of the call publishing the value; consumers compare it to their own. */
  tag?: string;
  /**
   * The global ranks of the consumers (as many as `consumers`). A store that
   * spans nodes sends the value to them; stores of one node ignore it.
   */
  to?: readonly number[];
  /**
   * Whether the consumers use the value where their get hands it to them (a
   * reduction's inputs) rather than land it in memory of their own (landIn).
   * A store between processes then lends it from shared memory, one copy by
   * the producer, instead of having each consumer copy it out of the
   * producer's memory into a buffer: the cheaper of the two for a value read
   * in place.
   */
  readInPlace?: boolean;
}

export interface StoreFinishOptions {
  /** Reported to the producer: its srcWaitUntilGetFinished rejects with this message. */
  error?: string;
  /** Whether `error` is a disagreement between ranks (CollectiveMismatchError) rather than a local failure. */
  mismatch?: boolean;
}

export interface StoreEntry {
  tensor: Tensor;
  tag: string;
  producerRank: number;
}

/** What destGetViews hands out: one uint8 view per tensor the producer set, in its order. */
export interface StoreViewsEntry {
  views: Tensor[];
  tag: string;
  producerRank: number;
}

export interface TensorStore {
  srcSet(key: string, tensor: Tensor, consumers: number, options?: StoreSetOptions): Promise<void>;
  srcWaitUntilGetFinished(key: string, options?: StoreWaitOptions): Promise<void>;
  destGet(key: string, options?: StoreWaitOptions): Promise<Tensor>;
  /** destGet plus who published the value and the tag it published it with. */
  destGetEntry(key: string, options?: StoreWaitOptions): Promise<StoreEntry>;
  destFinishGet(key: string, options?: StoreFinishOptions): Promise<void>;
  /**
   * Optional, where consumers can map the producer's memory (MemoryTensorStore):
   * several host tensors published as one value under one key, handed out as
   * uint8 views on their own bytes, not copied. Waited for and finished like any
   * value; reading a views value with destGet (or a tensor with destGetViews)
   * fails on both sides.
   */
  srcSetViews?(
    key: string,
    tensors: readonly Tensor[],
    consumers: number,
    options?: StoreSetOptions,
  ): Promise<void>;
  destGetViews?(key: string, options?: StoreWaitOptions): Promise<StoreViewsEntry>;
  /**
   * Optional: whether a consumer has taken (or is being sent) a value this
   * rank set under `key`, without waiting or releasing anything. A store
   * spanning nodes uses it to tell which of two copies of a value was taken.
   */
  claimed?(key: string): boolean;
  /**
   * Optional, for stores spanning nodes: the node a global rank runs on, so
   * collectives can keep traffic within nodes where they can (e.g. allReduce
   * reduces within each node first).
   */
  nodeOf?(rank: number): string;
  /** Optional, for stores that use the network: the bytes this rank's connections carried (ctx.networkStats()). */
  networkStats?(): NetworkStats;
  /**
   * Optional, where every rank maps the same memory (MemoryTensorStore): the
   * zero-filled bytes shared by every caller of `key` (at least `bytes` of
   * them), the same region for each; undefined when the store has no room
   * left, then for every caller of `key` alike.
   * @internal
   */
  sharedRegion?(key: string, bytes: number): SharedRegion | undefined;
  /**
   * Optional, where the ranks of a node map files of the job directory
   * (FileTensorStore): `owner`'s region of `bytes` zero-filled bytes under
   * `key`, made when the owner asks for it and mapped by the node's other
   * ranks that ask; undefined for a peer's while it has not made it. Several
   * processes map it: no wait can park on its words (runtime/wait.ts polls).
   * @internal
   */
  nodeRegion?(key: string, owner: number, bytes: number): NodeRegion | undefined;
  /**
   * Optional, with nodeRegion: this rank is done with `owner`'s region under
   * `key`: it unmaps it, and the owner removes it (peers that mapped it keep
   * their mapping until they release it too).
   * @internal
   */
  releaseNodeRegion?(key: string, owner: number): void;
  /**
   * Optional, with nodeRegion: the node's doorbells, by which a wait on a
   * node region parks its process and a rank of the node wakes it; undefined
   * where the store has none (its waits then look every millisecond).
   * @internal
   */
  nodeDoorbells?(): NodeDoorbells | undefined;
  /**
   * Optional, where values travel as bytes (NetworkTensorStore): the consumer
   * will copy the value of `key` from `options.from` into `into`, so the store
   * may write it there as it arrives (a value of other size, or one already
   * here, arrives as usual). destGet then hands out a tensor over `into`'s
   * memory. The consumer keeps `into` for the value until it finishes it (and
   * promises the producer's causality makes it free by the time the value
   * comes); the function returned forgets the wish if it is still pending.
   */
  landIn?(key: string, into: Tensor, options: { from: number }): () => void;
  /**
   * Optional, where a store copies small values when they are set
   * (NetworkTensorStore): lets go of this rank's value of `key` without
   * waiting for its consumers, whose finishes (and errors) are then not
   * heard. For exchanges in which every consumer checks what it reads
   * itself. True when nothing is left to wait for; false when the producer
   * must still call srcWaitUntilGetFinished (for what the store did not copy).
   */
  srcRelease?(key: string): boolean;
  /** Releases what this rank holds in the store (channels, pooled buffers). */
  close(): void;
}

/** Bytes of a file that the ranks of one node map (TensorStore.nodeRegion). */
export interface NodeRegion {
  buffer: ArrayBufferLike;
  /** Where the region starts in `buffer`: 0 where it is a file's own mapping. */
  byteOffset?: number;
  /** Ends every wait on the region: the job's abort, the store closed. */
  abort: JobStop;
}

/** The doorbells of a node's ranks (TensorStore.nodeDoorbells). */
export interface NodeDoorbells {
  /** Resolves when this rank's doorbell rings, or once `ms` passed (runtime/wait.ts's WaitOptions.park). */
  park(ms: number): Promise<void>;
  /** Rings the doorbell of `rank` (a global rank of this node). */
  ring(rank: number): void;
  /** Ends every wait parked on them: the job's abort, this rank's store closed. */
  stop: JobStop;
}

/** Bytes of shared memory that several ranks of one process map (TensorStore.sharedRegion). */
export interface SharedRegion {
  buffer: SharedArrayBuffer;
  byteOffset: number;
  byteLength: number;
  /** The job's abort flag, which every wait on the region must end with. */
  abort?: AbortWord;
  /**
   * Whether a wait on the region may block its thread (Atomics.wait): not
   * while other ranks share the thread, which would stand still with it.
   */
  mayBlock?: () => boolean;
}

/** Whether every rank of `ranks` sits on one node of `store` (a store that names no nodes is one node). */
export function onOneNode(store: TensorStore, ranks: readonly number[]): boolean {
  const nodeOf = store.nodeOf?.bind(store);
  if (!nodeOf) return true;
  const node = nodeOf(ranks[0]);
  return ranks.every((rank) => nodeOf(rank) === node);
}
