/**
 * MemoryTensorStore: the TensorStore for ranks that are threads of one
 * process. Descriptors live in a shared slot table; small values are copied
 * into the slot, large ones are handed over as views of the producer's own
 * SharedArrayBuffer (announced once through the buffer registry), so a
 * consumer's destGet of 64 MiB costs the same as one of 4 bytes.
 */
import type { AbortWord } from '../runtime/abort-word.ts';
import { CollectiveMismatchError } from '../runtime/errors.ts';
import {
  alreadySetError,
  checkFinish,
  checkSet,
  checkSetCall,
  checkWait,
  closedError,
  failureError,
  finishedText,
  heldKeyError,
  noGetError,
  notSetError,
  timeoutText,
  unsetKeyText,
} from '../runtime/store-bookkeeping.ts';
import { encodeBounded, MAX_ERROR_BYTES, MAX_TAG_BYTES } from '../runtime/store-limits.ts';
import type {
  SharedRegion,
  StoreEntry,
  StoreFinishOptions,
  StoreSetOptions,
  StoreViewsEntry,
  StoreWaitOptions,
  TensorStore,
} from '../runtime/tensor-store.ts';
import { deadlineAfter, type WaitStop, waitForWord } from '../runtime/wait.ts';
import { deviceIndex } from '../tensor/device.ts';
import { type Device, dtypeCode, dtypeFromCode } from '../tensor/dtype.ts';
import { copyInto } from '../tensor/shared-copy.ts';
import { Tensor } from '../tensor/tensor.ts';
import { assertHostTensors } from '../tensor/validate.ts';
import { SharedBufferRegistry } from './buffer-registry.ts';
import { createArena, DEFAULT_ARENA_BYTES, regionOf } from './region-arena.ts';
import {
  ERROR_LOCAL,
  ERROR_MISMATCH,
  ERROR_NONE,
  F,
  PLACEMENT,
  type SharedSlotTable,
  SlotTable,
  type SlotTableSpec,
  W,
} from './slot-table.ts';
import { StagingPool } from './staging-pool.ts';

/** What the ranks' stores of one job share (made by createShared, passed to each rank's thread as is). */
export interface MemoryStoreShared {
  /** @internal */
  table: SharedSlotTable;
  channel: string;
  /** Shared regions by key (see region-arena.ts); a store built without one lends none. */
  regions?: SharedArrayBuffer;
}

export interface MemoryStoreOptions {
  /** Producer id written into descriptors and used to name this rank's buffers. */
  rank?: number;
  /** @internal The job's abort word: waits end when it is set. */
  abort?: AbortWord;
  /** Default for every wait without its own timeoutMs. */
  timeoutMs?: number;
}

const DEFAULT_SPEC: SlotTableSpec = { slots: 2048, buckets: 1024, inlineBytes: 2048 };
const DEFAULT_TIMEOUT_MS = 300_000;

/** float64 words per tensor in a views value's list: buffer id, byte offset, byte length. */
const VIEW_WORDS = 3;

interface Produced {
  slot: number;
  bucket: number;
  consumers: number;
  /** Holds the published tensors (or their staging copies) alive until every consumer finished. */
  keepAlive: Tensor | readonly Tensor[];
  /** Leased from the staging pool for this value: given back once it is released. */
  staging: SharedArrayBuffer[];
}

interface PublishedValue {
  /** What the slot describes: the tensor itself, or a views value's list. */
  source: Tensor;
  placement: number;
  bufferId: number;
  staging: SharedArrayBuffer[];
  keepAlive: Tensor | readonly Tensor[];
}

export class MemoryTensorStore implements TensorStore {
  readonly rank: number;
  readonly #table: SlotTable;
  readonly #registry: SharedBufferRegistry;
  readonly #abort: AbortWord | undefined;
  readonly #timeoutMs: number;
  readonly #produced = new Map<string, Produced>();
  readonly #consuming = new Map<string, number>();
  readonly #staging = new StagingPool();
  readonly #regions: SharedArrayBuffer | undefined;
  #closed = false;

  /** `regionBytes`: the arena that sharedRegion carves its regions from (see region-arena.ts). */
  static createShared(
    spec: Partial<SlotTableSpec> = {},
    regionBytes = DEFAULT_ARENA_BYTES,
  ): MemoryStoreShared {
    const full = { ...DEFAULT_SPEC, ...spec };
    for (const [name, value] of Object.entries(full)) {
      if (!Number.isSafeInteger(value) || value < 1) {
        throw new RangeError(`MemoryTensorStore: ${name} must be a positive integer, got ${value}`);
      }
    }
    return {
      table: SlotTable.create(full),
      // The Web Crypto global loads node:crypto on first use; an import would load it in every rank thread.
      channel: `tensorcomm-store-${crypto.randomUUID()}`,
      regions: createArena(regionBytes),
    };
  }

  constructor(
    shared: MemoryStoreShared = MemoryTensorStore.createShared(),
    options: MemoryStoreOptions = {},
  ) {
    this.rank = options.rank ?? 0;
    this.#table = new SlotTable(shared.table);
    this.#registry = new SharedBufferRegistry(shared.channel, this.rank);
    this.#abort = options.abort;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#regions = shared.regions;
    storesInThisThread++;
  }

  /** @internal */
  sharedRegion(key: string, bytes: number): SharedRegion | undefined {
    if (!this.#regions) return undefined;
    const t = this.#table;
    const keyBytes = t.keyBytes(key, () => `sharedRegion(${JSON.stringify(key)})`);
    t.lock(this.#abort);
    let region: SharedRegion | undefined;
    try {
      region = regionOf(this.#regions, keyBytes, t.bucketOf(keyBytes).hash, bytes);
    } finally {
      t.unlock();
    }
    return region && { ...region, abort: this.#abort, mayBlock: soleStoreInThread };
  }

  /** Number of peer buffers this rank still maps (for leak checks). */
  get heldPeerBuffers(): number {
    return this.#registry.heldPeerBuffers;
  }

  /** Slots of the shared table in use by any rank: 0 once every value was released (for leak checks). */
  slotsInUse(): number {
    this.#table.lock(this.#abort);
    try {
      return this.#table.countInUse();
    } finally {
      this.#table.unlock();
    }
  }

  async srcSet(key: string, tensor: Tensor, consumers: number, options: StoreSetOptions = {}): Promise<void> {
    // Built only on error paths: this runs on every handshake.
    const where = () => `srcSet(${JSON.stringify(key)})`;
    this.#assertOpen(where);
    const keyBytes = checkSet(key, tensor, consumers, options, where);
    if (this.#produced.has(key)) throw alreadySetError(where);
    // A GPU tensor travels as its device pointer: ranks sharing a GPU are threads of one process.
    const onDevice = tensor.device !== 'cpu';
    const inline = !onDevice && tensor.nbytes <= this.#table.spec.inlineBytes;
    const staging: SharedArrayBuffer[] = [];
    const source = onDevice || inline ? tensor : this.#shared(tensor, staging);
    const bufferId = onDevice
      ? deviceIndex(tensor.device)
      : inline
        ? 0
        : this.#registry.idOf(source.buffer as SharedArrayBuffer);
    const placement = onDevice ? PLACEMENT.device : inline ? PLACEMENT.inline : PLACEMENT.buffer;
    await this.#publish(key, keyBytes, where, consumers, options, {
      source,
      placement,
      bufferId,
      staging,
      keepAlive: source,
    });
  }

  /**
   * Publishes host tensors as one value: a list of where each one's bytes are,
   * so a consumer maps all of them with one handshake (see PLACEMENT.views).
   */
  async srcSetViews(
    key: string,
    tensors: readonly Tensor[],
    consumers: number,
    options: StoreSetOptions = {},
  ): Promise<void> {
    const where = () => `srcSetViews(${JSON.stringify(key)})`;
    this.#assertOpen(where);
    assertHostTensors(tensors, where());
    const keyBytes = checkSetCall(key, consumers, options, where);
    if (this.#produced.has(key)) throw alreadySetError(where);
    const staging: SharedArrayBuffer[] = [];
    const shared = tensors.map((t) => this.#shared(t, staging));
    const listBuffer = this.#staging.lease(shared.length * VIEW_WORDS * 8);
    staging.push(listBuffer);
    const list = new Float64Array(listBuffer, 0, shared.length * VIEW_WORDS);
    shared.forEach((t, i) => {
      list[VIEW_WORDS * i] = this.#registry.idOf(t.buffer as SharedArrayBuffer);
      list[VIEW_WORDS * i + 1] = t.byteOffset;
      list[VIEW_WORDS * i + 2] = t.nbytes;
    });
    const source = Tensor.fromBuffer(listBuffer, 0, [list.length], 'float64');
    const bufferId = this.#registry.idOf(listBuffer);
    await this.#publish(key, keyBytes, where, consumers, options, {
      source,
      placement: PLACEMENT.views,
      bufferId,
      staging,
      keepAlive: shared,
    });
  }

  /** `tensor` itself when peers can map it, else a copy in a staging buffer (added to `staging`). */
  #shared(tensor: Tensor, staging: SharedArrayBuffer[]): Tensor {
    if (tensor.isShared()) return tensor;
    const buffer = this.#staging.lease(tensor.nbytes);
    staging.push(buffer);
    const copy = Tensor.fromBuffer(buffer, 0, tensor.shape, tensor.dtype);
    copyInto(copy.bytes(), tensor.bytes());
    return copy;
  }

  /** Takes a free slot for `key` (waiting while every slot is in use) and describes the value in it. */
  async #publish(
    key: string,
    keyBytes: Uint8Array,
    where: () => string,
    consumers: number,
    options: StoreSetOptions,
    value: PublishedValue,
  ): Promise<void> {
    const t = this.#table;
    const { bucket, hash } = t.bucketOf(keyBytes);
    const tag = encodeBounded(options.tag ?? '', MAX_TAG_BYTES);
    const deadline = deadlineAfter(this.#timeoutMs);
    let stop: WaitStop | undefined;
    for (;;) {
      const freeEpoch = Atomics.load(t.words, t.freeEpochIndex);
      t.lock(this.#abort);
      let slot: number;
      try {
        const held = t.find(keyBytes, bucket, hash);
        if (held >= 0) throw heldKeyError(where, t.words[t.word(held, W.producerRank)]);
        slot = t.insert(keyBytes, bucket, hash);
        if (slot >= 0) this.#describe(slot, value.source, consumers, value.placement, value.bufferId, tag);
      } finally {
        t.unlock();
      }
      if (slot >= 0) {
        const { keepAlive, staging } = value;
        this.#produced.set(key, { slot, bucket, consumers, keepAlive, staging });
        Atomics.add(t.words, t.bucketEpochIndex(bucket), 1);
        Atomics.notify(t.words, t.bucketEpochIndex(bucket));
        return;
      }
      stop ??= this.#stop(where);
      await waitForWord(t.words, t.freeEpochIndex, (v) => v !== freeEpoch, {
        deadline,
        abort: stop,
        describe: () => `${where()} on rank ${this.rank}: all ${t.spec.slots} store slots stayed in use`,
      });
    }
  }

  #describe(
    slot: number,
    tensor: Tensor,
    consumers: number,
    placement: number,
    bufferId: number,
    tag: Uint8Array,
  ) {
    const t = this.#table;
    const w = t.words;
    w[t.word(slot, W.consumers)] = consumers;
    w[t.word(slot, W.producerRank)] = this.rank;
    w[t.word(slot, W.dtype)] = dtypeCode(tensor.dtype);
    w[t.word(slot, W.ndim)] = tensor.shape.length;
    w[t.word(slot, W.placement)] = placement;
    w[t.word(slot, W.bufferOwner)] = this.rank;
    w[t.word(slot, W.bufferId)] = bufferId;
    // Device addresses stay below 2^53, so a float64 holds them exactly.
    t.f64[t.f64Index(slot, F.byteOffset)] =
      placement === PLACEMENT.device ? Number(tensor.devicePointer) : tensor.byteOffset;
    t.f64[t.f64Index(slot, F.nbytes)] = tensor.nbytes;
    tensor.shape.forEach((size, d) => {
      t.f64[t.f64Index(slot, F.shape + d)] = size;
    });
    t.writeText(slot, 'tag', tag);
    if (placement === PLACEMENT.inline) t.bytes.set(tensor.bytes(), t.inlineOffset(slot));
  }

  async srcWaitUntilGetFinished(key: string, options: StoreWaitOptions = {}): Promise<void> {
    // Built only on error paths: this runs on every handshake.
    const where = () => `srcWaitUntilGetFinished(${JSON.stringify(key)})`;
    const timeoutMs = checkWait(options, this.#timeoutMs, where);
    this.#assertOpen(where);
    const produced = this.#produced.get(key);
    if (!produced) throw notSetError(where, this.rank);
    const t = this.#table;
    const finishedIndex = t.word(produced.slot, W.finished);
    try {
      await waitForWord(t.words, finishedIndex, (v) => v >= produced.consumers, {
        deadline: deadlineAfter(timeoutMs),
        abort: this.#stop(where),
        describe: () =>
          timeoutText(
            where,
            timeoutMs,
            this.rank,
            finishedText(Atomics.load(t.words, finishedIndex), produced.consumers),
          ),
      });
    } finally {
      this.#release(key, produced);
    }
  }

  /** Frees the slot (also after a timeout, so the key can be set again) and reports a consumer's error. */
  #release(key: string, produced: Produced): void {
    const t = this.#table;
    let errorKind = ERROR_NONE;
    let error = '';
    t.lock(this.#abort);
    try {
      errorKind = t.words[t.word(produced.slot, W.errorKind)];
      if (errorKind !== ERROR_NONE) error = t.readText(produced.slot, 'error');
      t.remove(produced.slot, produced.bucket);
    } finally {
      t.unlock();
    }
    this.#produced.delete(key);
    for (const buffer of produced.staging) this.#staging.giveBack(buffer);
    Atomics.add(t.words, t.freeEpochIndex, 1);
    Atomics.notify(t.words, t.freeEpochIndex);
    // Consumers of the key's next value may be parked on the old one's release.
    Atomics.add(t.words, t.bucketEpochIndex(produced.bucket), 1);
    Atomics.notify(t.words, t.bucketEpochIndex(produced.bucket));
    if (errorKind !== ERROR_NONE) throw failureError({ error, mismatch: errorKind === ERROR_MISMATCH });
  }

  async destGet(key: string, options: StoreWaitOptions = {}): Promise<Tensor> {
    return (await this.destGetEntry(key, options)).tensor;
  }

  async destGetEntry(key: string, options: StoreWaitOptions = {}): Promise<StoreEntry> {
    const where = () => `destGet(${JSON.stringify(key)})`;
    const { found, deadline } = await this.#take(key, options, where);
    const { tag, producerRank } = found;
    if (found.placement === PLACEMENT.views) {
      throw await this.#refuse(key, `${where()}: the value under this key is a list of views (srcSetViews)`);
    }
    if (found.placement === PLACEMENT.inline) {
      const t = this.#table;
      return {
        tensor: Tensor.fromBuffer(t.buffer, t.inlineOffset(found.slot), found.shape, found.dtype),
        tag,
        producerRank,
      };
    }
    if (found.placement === PLACEMENT.device) {
      const device: Device = `cuda:${found.bufferId}`;
      const tensor = Tensor.fromDevicePointer(BigInt(found.byteOffset), device, found.shape, found.dtype);
      return { tensor, tag, producerRank };
    }
    const buffer =
      this.#registry.known(found.owner, found.bufferId) ??
      (await this.#resolve(key, found.owner, found.bufferId, deadline));
    return {
      tensor: Tensor.fromBuffer(buffer, found.byteOffset, found.shape, found.dtype),
      tag,
      producerRank,
    };
  }

  /** The tensors of a srcSetViews value, each as a uint8 view on the producer's bytes. */
  async destGetViews(key: string, options: StoreWaitOptions = {}): Promise<StoreViewsEntry> {
    const where = () => `destGetViews(${JSON.stringify(key)})`;
    const { found, deadline } = await this.#take(key, options, where);
    if (found.placement !== PLACEMENT.views) {
      throw await this.#refuse(
        key,
        `${where()}: the value under this key is one tensor, not a list of views`,
      );
    }
    const { owner } = found;
    const listBuffer =
      this.#registry.known(owner, found.bufferId) ??
      (await this.#resolve(key, owner, found.bufferId, deadline));
    const list = new Float64Array(listBuffer, found.byteOffset, found.shape[0]);
    const views: Tensor[] = new Array(list.length / VIEW_WORDS);
    for (let at = 0; at < list.length; at += VIEW_WORDS) {
      // Buffers seen before are mapped already: only a new one is awaited (its announcement may be in flight).
      const buffer =
        this.#registry.known(owner, list[at]) ?? (await this.#resolve(key, owner, list[at], deadline));
      views[at / VIEW_WORDS] = Tensor.fromBuffer(buffer, list[at + 1], [list[at + 2]], 'uint8');
    }
    return { views, tag: found.tag, producerRank: found.producerRank };
  }

  /** Waits until a value under `key` can be claimed, and counts this rank's get of it. */
  async #take(key: string, options: StoreWaitOptions, where: () => string) {
    const timeoutMs = checkWait(options, this.#timeoutMs, where);
    const t = this.#table;
    const keyBytes = t.keyBytes(key, where);
    this.#assertOpen(where);
    const { bucket, hash } = t.bucketOf(keyBytes);
    const deadline = deadlineAfter(timeoutMs);
    const epochIndex = t.bucketEpochIndex(bucket);
    let exhausted = false;
    let stop: WaitStop | undefined;
    for (;;) {
      const epoch = Atomics.load(t.words, epochIndex);
      const found = this.#claim(keyBytes, bucket, hash);
      exhausted = found === 'exhausted';
      if (found && found !== 'exhausted') {
        this.#consuming.set(key, (this.#consuming.get(key) ?? 0) + 1);
        return { found, deadline };
      }
      stop ??= this.#stop(where);
      await waitForWord(t.words, epochIndex, (v) => v !== epoch, {
        deadline,
        abort: stop,
        describe: () => timeoutText(where, timeoutMs, this.rank, unsetKeyText(exhausted)),
      });
    }
  }

  /** A claimed value's shared buffer; if it never arrives, the get is finished with the error (the producer fails too). */
  async #resolve(key: string, owner: number, bufferId: number, deadline: number): Promise<SharedArrayBuffer> {
    try {
      // A claimed value must be read: its buffer gets the store's whole timeout to arrive, even when
      // this wait is a short slice of a longer one (a monitored call checking on its peers).
      const resolveBy = Math.max(deadline, deadlineAfter(this.#timeoutMs));
      return await this.#registry.resolve(owner, bufferId, resolveBy, this.#abort);
    } catch (error) {
      await this.destFinishGet(key, { error: `rank ${this.rank}: ${(error as Error).message}` });
      throw error;
    }
  }

  /** A claimed value of the other kind than the consumer asked for: both sides fail, as for a shape mismatch. */
  async #refuse(key: string, message: string): Promise<Error> {
    const error = `rank ${this.rank}: ${message}`;
    await this.destFinishGet(key, { error, mismatch: true });
    return new CollectiveMismatchError(error);
  }

  /** Under the lock: finds a published key and counts this get, or returns undefined. */
  #claim(keyBytes: Uint8Array, bucket: number, hash: number) {
    const t = this.#table;
    const w = t.words;
    t.lock(this.#abort);
    try {
      const slot = t.find(keyBytes, bucket, hash);
      if (slot < 0) return undefined;
      const consumers = w[t.word(slot, W.consumers)];
      const gets = w[t.word(slot, W.gets)];
      // Every consumer of this value already has it: it is an earlier use of a reused key, about to be
      // released. Wait for the next value rather than read this one twice.
      if (gets >= consumers) return 'exhausted';
      w[t.word(slot, W.gets)] = gets + 1;
      const ndim = w[t.word(slot, W.ndim)];
      return {
        slot,
        producerRank: w[t.word(slot, W.producerRank)],
        dtype: dtypeFromCode(w[t.word(slot, W.dtype)]),
        shape: Array.from({ length: ndim }, (_, d) => t.f64[t.f64Index(slot, F.shape + d)]),
        placement: w[t.word(slot, W.placement)],
        owner: w[t.word(slot, W.bufferOwner)],
        bufferId: w[t.word(slot, W.bufferId)],
        byteOffset: t.f64[t.f64Index(slot, F.byteOffset)],
        tag: t.readText(slot, 'tag'),
      };
    } finally {
      t.unlock();
    }
  }

  async destFinishGet(key: string, options: StoreFinishOptions = {}): Promise<void> {
    // Built only on error paths: this runs on every handshake.
    const where = () => `destFinishGet(${JSON.stringify(key)})`;
    checkFinish(options, where);
    const held = this.#consuming.get(key);
    if (!held) throw noGetError(where, this.rank);
    if (held === 1) this.#consuming.delete(key);
    else this.#consuming.set(key, held - 1);
    const t = this.#table;
    const keyBytes = t.keyBytes(key, where);
    const { bucket, hash } = t.bucketOf(keyBytes);
    let finishedIndex = -1;
    t.lock(this.#abort);
    try {
      const slot = t.find(keyBytes, bucket, hash);
      if (slot >= 0) {
        if (options.error !== undefined && t.words[t.word(slot, W.errorKind)] === ERROR_NONE) {
          t.words[t.word(slot, W.errorKind)] = options.mismatch ? ERROR_MISMATCH : ERROR_LOCAL;
          t.writeText(slot, 'error', encodeBounded(options.error, MAX_ERROR_BYTES));
        }
        finishedIndex = t.word(slot, W.finished);
        Atomics.add(t.words, finishedIndex, 1);
      }
    } finally {
      t.unlock();
    }
    // A vanished slot means the producer gave up (timeout or abort): nothing left to acknowledge.
    if (finishedIndex >= 0) Atomics.notify(t.words, finishedIndex);
  }

  /** Wakes every rank parked on a store, e.g. after the job's abort flag went up. */
  static wakeAll(shared: MemoryStoreShared): void {
    new SlotTable(shared.table).wakeAll();
  }

  #assertOpen(where: () => string): void {
    if (this.#closed) throw closedError(where, 'memory', this.rank);
  }

  /** What ends this rank's waits besides their deadline: the job's abort, or this store's close. */
  #stop(where: () => string): WaitStop {
    return {
      throwIfAborted: () => {
        this.#assertOpen(where);
        this.#abort?.throwIfAborted();
      },
    };
  }

  /** Pending waits of this rank fail with the closed error at their next look (within a park of wait.ts). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    storesInThisThread--;
    this.#registry.close();
    this.#staging.clear();
  }

  /** close(): `using store = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Stores open in this thread: one per rank thread, but several where ranks
 * share a thread (simulated in a test), which a blocked wait would stop too.
 */
let storesInThisThread = 0;
const soleStoreInThread = () => storesInThisThread === 1;
