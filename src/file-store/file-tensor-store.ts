/**
 * FileTensorStore: the TensorStore handshake between processes of one
 * machine, through files in the job directory (see file-names.ts for the
 * layout). A producer publishes a value by linking a fully written temporary
 * file into place (atomic, and refused while an earlier value still holds the
 * key); a consumer claims one of the value's gets with an exclusive mkdir and
 * finishes it with a marker file, which carries its error if it failed; the
 * producer removes every file of the key once all markers are there. Waits
 * sleep on directory events (inotify) with a bounded poll as a safety net.
 * Large payloads do not go into the value file: they are copied into a region
 * of the producer's shared arena (producer-arenas.ts), the value file carries
 * only the header pointing there, consumers read the region through their
 * cached mapping of the arena (arena-views.ts), and the producer frees the
 * region once every consumer finished.
 *
 * Between the ranks of one node (`nodeRanks`), values whose producer and
 * consumers name each other go through shared-memory rings instead
 * (ring-channels.ts); the file handshake stays for the rest.
 *
 * File operations are synchronous: on tmpfs they take microseconds, fewer
 * than a trip through the libuv thread pool would.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { JobStop } from '../runtime/abort-word.ts';
import { CommTimeoutError, RankFailedError } from '../runtime/errors.ts';
import {
  alreadySetError,
  type ConsumerFailure,
  checkFinish,
  checkSet,
  checkWait,
  closedError,
  countFinish,
  type FinishTally,
  finishedText,
  noGetError,
  notSetError,
  throwFailure,
  timeoutText,
  UnfinishedGets,
  unsetKeyText,
} from '../runtime/store-bookkeeping.ts';
import { encodeBounded, encodeKey, MAX_ERROR_BYTES, MAX_TAG_BYTES } from '../runtime/store-limits.ts';
import type {
  NodeDoorbells,
  NodeRegion,
  StoreEntry,
  StoreFinishOptions,
  StoreSetOptions,
  StoreWaitOptions,
  TensorStore,
} from '../runtime/tensor-store.ts';
import { deadlineAfter } from '../runtime/wait.ts';
import { Tensor } from '../tensor/tensor.ts';
import { ArenaViews } from './arena-views.ts';
import { deviceIpc } from './device-ipc.ts';
import { DirectoryWatch } from './directory-watch.ts';
import { FileStoreCorruptError, FileStoreError } from './errors.ts';
import { arenaFile, CLAIMS_DIR, doneDir, KeyFiles, TMP_DIR, topicOf } from './file-names.ts';
import { readJobAbort } from './job-abort.ts';
import { canMapFiles } from './mapped-file.ts';
import { NodeRegionFile } from './node-region.ts';
import { isStillAt, removeIfPresent } from './present-files.ts';
import { ProducerArenas } from './producer-arenas.ts';
import { asSpaceError } from './reserve-space.ts';
import { type RingChannelOptions, RingChannels } from './ring-channels.ts';
import { openJobFile, removeJobFile } from './sealed-files.ts';
import { publishValueFile } from './value-file.ts';
import {
  type ArenaRef,
  encodeValueHeader,
  generationName,
  type IpcRef,
  type ValueHeader,
} from './value-header.ts';
import {
  type OpenedValue,
  type ReadValue,
  readIpcHandle,
  readValueHeader,
  readValuePayload,
  SMALL_FILE_BYTES,
} from './value-reader.ts';

export interface FileStoreOptions {
  /** The job directory (createJobDirectory); every rank of the job uses the same one. */
  dir: string;
  /** Producer id written into headers and named in messages. */
  rank: number;
  /** Default for every wait without its own timeoutMs (default 300 s). */
  timeoutMs?: number;
  /** Longest sleep between checks when no directory event arrives (default 20 ms). */
  pollMs?: number;
  /** Size of each shared arena for large payloads (default 256 MiB; sparse, so untouched pages cost nothing). */
  arenaBytes?: number;
  /** The most arena bytes this rank creates; payloads beyond travel in their own files (default 1 GiB, 0: no arenas). */
  maxArenaBytes?: number;
  /**
   * The global ranks of this node (this one among them) whose stores are
   * created before any of them sends: values between them that name their
   * consumers and producer go through shared-memory rings. Every one of
   * them must pass the same list (and ring options).
   */
  rings?: RingChannelOptions;
}

const DEFAULT_TIMEOUT_MS = 300_000;
const DEFAULT_POLL_MS = 20;
const DEFAULT_ARENA_BYTES = 256 << 20;
const DEFAULT_MAX_ARENA_BYTES = 1 << 30;
/** Smaller payloads stay in the value file: a consumer reads those in one call anyway. */
const ARENA_MIN_BYTES = SMALL_FILE_BYTES;
const MARKER_LOCAL = 1;
const MARKER_MISMATCH = 2;

/** `unfinished` and `failure` as the finish markers found so far tell them. */
interface Produced extends FinishTally {
  files: KeyFiles;
  generation: string;
  consumers: number;
  finished: boolean[];
  /** The arena region holding the payload, if it is in one. */
  region: ArenaRef | undefined;
  /** The value file when it is a sealed memory file: open while the value is published. */
  sealedFd: number | undefined;
  /** A GPU tensor consumers open by IPC: its memory must outlive their gets. */
  exported: Tensor | undefined;
}

interface Held {
  files: KeyFiles;
  producerRank: number;
  generation: string;
  slot: number;
  /** Kept open until the finish: whether the key's path still names it says whether the value is still published. */
  fd: number;
  mapping: ReadValue['mapping'];
}

type Attempt = StoreEntry | 'absent' | 'exhausted' | 'stale';

export class FileTensorStore implements TensorStore {
  readonly rank: number;
  readonly dir: string;
  readonly #timeoutMs: number;
  readonly #pollMs: number;
  readonly #tmp: string;
  readonly #nonce = randomBytes(4).readUInt32LE(0);
  readonly #watch: DirectoryWatch;
  readonly #produced = new Map<string, Produced>();
  readonly #consuming = new UnfinishedGets<Held>();
  readonly #arenas: ProducerArenas;
  readonly #arenaViews = new ArenaViews();
  readonly #rings: RingChannels | undefined;
  /** nodeRegion's files, this rank's and its peers', by path. */
  readonly #regions = new Map<string, NodeRegionFile>();
  #counter = 0;
  #abort: RankFailedError | undefined;
  #closed = false;

  constructor(options: FileStoreOptions) {
    const {
      dir,
      rank,
      timeoutMs = DEFAULT_TIMEOUT_MS,
      pollMs = DEFAULT_POLL_MS,
      arenaBytes = DEFAULT_ARENA_BYTES,
      maxArenaBytes = DEFAULT_MAX_ARENA_BYTES,
    } = options;
    if (!Number.isSafeInteger(rank) || rank < 0) {
      throw new RangeError(`FileTensorStore: rank must be a non-negative integer, got ${rank}`);
    }
    for (const [name, value] of [
      ['timeoutMs', timeoutMs],
      ['pollMs', pollMs],
    ] as const) {
      if (!(Number.isFinite(value) && value > 0)) {
        throw new RangeError(`FileTensorStore: ${name} must be a positive number, got ${value}`);
      }
    }
    for (const [name, value] of [
      ['arenaBytes', arenaBytes],
      ['maxArenaBytes', maxArenaBytes],
    ] as const) {
      if (!(Number.isSafeInteger(value) && value >= 0)) {
        throw new RangeError(`FileTensorStore: ${name} must be a non-negative integer, got ${value}`);
      }
    }
    if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
      throw new FileStoreError(
        `FileTensorStore: job directory ${dir} does not exist (create it with createJobDirectory)`,
      );
    }
    this.rank = rank;
    this.dir = resolve(dir);
    this.#timeoutMs = timeoutMs;
    this.#pollMs = pollMs;
    this.#tmp = join(this.dir, TMP_DIR);
    mkdirSync(this.#tmp, { recursive: true, mode: 0o700 });
    mkdirSync(join(this.dir, CLAIMS_DIR), { recursive: true, mode: 0o700 });
    const done = doneDir(this.dir, rank);
    mkdirSync(done, { recursive: true, mode: 0o700 });
    this.#arenas = new ProducerArenas(this.dir, rank, this.#nonce, { arenaBytes, maxArenaBytes });
    this.#watch = new DirectoryWatch([this.dir, done], () => this.#noticeAbort());
    if (options.rings && options.rings.ranks.length > 1 && canMapFiles()) {
      try {
        this.#rings = new RingChannels(
          {
            dir: this.dir,
            rank,
            nonce: this.#nonce,
            pollMs,
            arenas: this.#arenas,
            arenaViews: this.#arenaViews,
            assertUsable: (where) => this.#assertUsable(where),
          },
          options.rings,
        );
      } catch (error) {
        this.#watch.close();
        this.#arenas.close();
        throw error;
      }
    }
    this.#noticeAbort();
  }

  #noticeAbort(): void {
    if (this.#abort || this.#closed) return;
    this.#abort = readJobAbort(this.dir);
    if (!this.#abort) return;
    this.#watch.wakeAll();
    this.#rings?.wakeAll();
  }

  #assertUsable(where: () => string): void {
    const error = this.#unusable(where);
    if (error) throw error;
  }

  /** Why the store cannot serve `where` any more: it closed, or the job was aborted. */
  #unusable(where: () => string): Error | undefined {
    if (this.#closed) return closedError(where, 'file', this.rank);
    if (this.#abort) return new RankFailedError(this.#abort.message, this.#abort.failedRank);
    return undefined;
  }

  #files(key: string, where: () => string): KeyFiles {
    return new KeyFiles(this.dir, topicOf(key, where));
  }

  /** Runs `attempt` until it yields a value, sleeping on the channel's directory events in between. */
  async #waitUntil<T>(
    channel: string,
    attempt: () => T | undefined,
    deadline: number,
    where: () => string,
    describe: () => string,
  ): Promise<T> {
    for (;;) {
      this.#assertUsable(where);
      const result = attempt();
      if (result !== undefined) return result;
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new CommTimeoutError(describe());
      const byEvent = await this.#watch.next(channel, Math.min(remaining, this.#pollMs));
      if (!byEvent) this.#noticeAbort();
    }
  }

  async srcSet(key: string, tensor: Tensor, consumers: number, options: StoreSetOptions = {}): Promise<void> {
    const where = () => `srcSet(${JSON.stringify(key)})`;
    this.#assertUsable(where);
    checkSet(key, tensor, consumers, options, where);
    if (this.#produced.has(key) || this.#rings?.produces(key)) throw alreadySetError(where);
    const rings = this.#rings;
    const to = options.to;
    if (rings?.servesSet(consumers, to)) {
      const tag = options.tag ?? '';
      if (tensor.device === 'cpu' && rings.set(key, tensor, to, tag, where(), options.readInPlace === true))
        return;
      this.#publishFile(key, tensor, consumers, options, where);
      rings.announceFile(key, tensor, to, tag);
      return;
    }
    this.#publishFile(key, tensor, consumers, options, where);
  }

  /** Publishes the value as a value file (with the payload, or pointing into an arena or GPU memory). */
  #publishFile(
    key: string,
    tensor: Tensor,
    consumers: number,
    options: StoreSetOptions,
    where: () => string,
  ): void {
    const files = this.#files(key, where);
    const counter = ++this.#counter;
    // A GPU tensor stays where it is: consumers open its allocation by CUDA IPC.
    const exported = tensor.device === 'cpu' ? undefined : deviceIpc(where()).exportTensor(tensor);
    const region =
      exported || tensor.nbytes < ARENA_MIN_BYTES ? undefined : this.#storeInArena(tensor, where);
    const header = encodeValueHeader({
      dtype: tensor.dtype,
      shape: tensor.shape,
      producerRank: this.rank,
      consumers,
      nonce: this.#nonce,
      counter,
      key: Buffer.from(key),
      tag: encodeBounded(options.tag ?? '', MAX_TAG_BYTES),
      payloadBytes: tensor.nbytes,
      arena: region,
      ipc: exported && { device: exported.device, offset: exported.offset },
    });
    const pieces = region ? [header] : [header, exported ? exported.handle : tensor.bytes()];
    const temp = `${this.#tmp}/${this.rank}.${generationName(this.#nonce, counter)}`;
    let sealedFd: number | undefined;
    try {
      sealedFd = publishValueFile(files.value, temp, pieces, this.dir, where());
    } catch (error) {
      if (region) this.#arenas.free(region);
      throw error;
    }
    this.#produced.set(key, {
      files,
      generation: generationName(this.#nonce, counter),
      consumers,
      finished: new Array(consumers).fill(false),
      unfinished: consumers,
      failure: undefined,
      region,
      sealedFd,
      exported: exported && tensor,
    });
  }

  /** The payload in a region of this rank's arenas; undefined when they have no room for it. */
  #storeInArena(tensor: Tensor, where: () => string): ArenaRef | undefined {
    try {
      return this.#arenas.store(tensor.bytes(), where());
    } catch (error) {
      throw asSpaceError(error, this.dir, tensor.nbytes, where());
    }
  }

  claimed(key: string): boolean {
    if (this.#rings?.produces(key)) return this.#rings.claimed(key);
    const p = this.#produced.get(key);
    if (!p) return false;
    for (let slot = 0; slot < p.consumers; slot++) {
      if (p.finished[slot] || statSync(p.files.claim(p.generation, slot), { throwIfNoEntry: false }))
        return true;
    }
    return false;
  }

  async srcWaitUntilGetFinished(key: string, options: StoreWaitOptions = {}): Promise<void> {
    const where = () => `srcWaitUntilGetFinished(${JSON.stringify(key)})`;
    const timeoutMs = checkWait(options, this.#timeoutMs, where);
    if (this.#rings?.produces(key)) return this.#rings.waitFinished(key, timeoutMs, where);
    const produced = this.#produced.get(key);
    if (!produced) throw notSetError(where, this.rank);
    try {
      await this.#waitUntil(
        produced.files.doneChannel,
        () => (this.#collectFinished(produced) ? true : undefined),
        deadlineAfter(timeoutMs),
        where,
        () => timeoutText(where, timeoutMs, this.rank, this.#progress(produced)),
      );
    } finally {
      this.#release(key, produced);
    }
  }

  /** Looks for the finish markers not seen yet; true once every consumer finished. */
  #collectFinished(p: Produced): boolean {
    for (let slot = 0; slot < p.consumers; slot++) {
      if (p.finished[slot]) continue;
      const path = p.files.done(this.rank, p.generation, slot);
      const marker = statSync(path, { throwIfNoEntry: false });
      if (!marker) continue;
      p.finished[slot] = true;
      // Only the first failure is reported: a later one's marker is not read.
      countFinish(p, marker.size > 0 && !p.failure ? readMarker(path) : undefined);
    }
    return p.unfinished === 0;
  }

  #progress(p: Produced): string {
    let reading = 0;
    for (let slot = 0; slot < p.consumers; slot++) {
      if (!p.finished[slot] && statSync(p.files.claim(p.generation, slot), { throwIfNoEntry: false }))
        reading++;
    }
    const waiting = p.unfinished - reading;
    return (
      `${finishedText(p.consumers - p.unfinished, p.consumers)} ` +
      `(${reading} got the value and are still reading it, ${waiting} have not got it)`
    );
  }

  /** Removes the key's files (also after a timeout, so it can be set again) and reports a consumer's error. */
  #release(key: string, p: Produced): void {
    this.#produced.delete(key);
    // The value goes first: a consumer that claims after this sees it gone and withdraws its claim.
    if (p.sealedFd === undefined) removeIfPresent(p.files.value);
    else removeJobFile(p.sealedFd, p.files.value);
    // A consumer that claimed before may still be reading the region: then it is never reused.
    if (p.region && !this.#mayStillRead(p)) this.#arenas.free(p.region);
    for (let slot = 0; slot < p.consumers; slot++) {
      removeIfPresent(p.files.claim(p.generation, slot), true);
      removeIfPresent(p.files.done(this.rank, p.generation, slot));
    }
    throwFailure(p);
  }

  /** Whether a consumer got the value and has not finished (checked after the value file is gone). */
  #mayStillRead(p: Produced): boolean {
    if (this.#collectFinished(p)) return false;
    for (let slot = 0; slot < p.consumers; slot++) {
      if (!p.finished[slot] && statSync(p.files.claim(p.generation, slot), { throwIfNoEntry: false }))
        return true;
    }
    return false;
  }

  async destGet(key: string, options: StoreWaitOptions = {}): Promise<Tensor> {
    return (await this.destGetEntry(key, options)).tensor;
  }

  async destGetEntry(key: string, options: StoreWaitOptions = {}): Promise<StoreEntry> {
    const where = () => `destGet(${JSON.stringify(key)})`;
    let timeoutMs = checkWait(options, this.#timeoutMs, where);
    if (this.#rings?.servesGet(options.from, options.pull)) {
      encodeKey(key, where);
      this.#assertUsable(where);
      const started = performance.now();
      const got = await this.#rings.get(key, options.from as number, timeoutMs, where);
      if (got !== 'file') return got;
      // The producer announced a value file: the rest of the wait goes to the file handshake.
      timeoutMs = Math.max(0, timeoutMs - (performance.now() - started));
    }
    const files = this.#files(key, where);
    let exhausted = false;
    return this.#waitUntil(
      files.valueChannel,
      () => {
        let attempt: Attempt;
        do attempt = this.#tryGet(key, files);
        while (attempt === 'stale');
        exhausted = attempt === 'exhausted';
        return typeof attempt === 'object' ? attempt : undefined;
      },
      deadlineAfter(timeoutMs),
      where,
      () => timeoutText(where, timeoutMs, this.rank, unsetKeyText(exhausted)),
    );
  }

  #tryGet(key: string, files: KeyFiles): Attempt {
    // A failed open costs a thrown error (several times a stat): look first, since waits start with the value absent.
    if (!statSync(files.value, { throwIfNoEntry: false })) return 'absent';
    const fd = openJobFile(files.value, 'r');
    if (fd === undefined) return 'absent';
    const describe = `value file ${files.value} of key ${JSON.stringify(key)}`;
    // Whether the fd went to a held get (closed by its finish) rather than being closed here.
    let handedOver = false;
    try {
      const opened = readValueHeader(fd, describe);
      const { header } = opened;
      if (header.key !== key) {
        throw new FileStoreCorruptError(`${describe} is corrupt: it holds key ${JSON.stringify(header.key)}`);
      }
      const slot = this.#claim(files, header);
      if (slot < 0) return 'exhausted';
      const held: Held = {
        files,
        producerRank: header.producerRank,
        generation: header.generation,
        slot,
        fd,
        mapping: undefined,
      };
      if (!this.#stillPublished(held)) {
        // The producer removed this value (it finished or gave up) after we opened it.
        removeIfPresent(files.claim(header.generation, slot), true);
        return 'stale';
      }
      let read: ReadValue | undefined;
      try {
        read = header.arena
          ? this.#readArenaPayload(held, header, header.arena, describe)
          : header.ipc
            ? openIpcPayload(opened, header.ipc, describe)
            : readValuePayload(fd, opened, describe);
      } catch (error) {
        // This get was claimed: finish it, so the producer fails now instead of waiting for us.
        handedOver = true;
        this.#finish(held, { error: `rank ${this.rank}: ${(error as Error).message}` });
        throw error;
      }
      if (!read) {
        removeIfPresent(files.claim(header.generation, slot), true);
        return 'stale';
      }
      handedOver = true;
      held.mapping = read.mapping;
      this.#consuming.add(key, held);
      return { tensor: read.tensor, tag: header.tag, producerRank: header.producerRank };
    } finally {
      if (!handedOver) closeSync(fd);
    }
  }

  /** A view of the payload in its producer's arena; undefined when the producer withdrew it meanwhile. */
  #readArenaPayload(held: Held, header: ValueHeader, ref: ArenaRef, describe: string): ReadValue | undefined {
    const path = arenaFile(this.dir, header.producerRank, header.nonce, ref.index);
    const buffer = this.#arenaViews.view(path, ref.offset, header.payloadBytes, describe);
    if (!buffer) {
      if (!this.#stillPublished(held)) return undefined;
      throw new FileStoreCorruptError(`${describe} is corrupt: its arena file ${path} does not exist`);
    }
    return { tensor: Tensor.fromBuffer(buffer, ref.offset, header.shape, header.dtype), mapping: undefined };
  }

  /**
   * Takes a free get of the value; -1 when every consumer already has it.
   * Consumers start at different slots (by rank), so in a broadcast most take
   * their first try instead of each paying a failed mkdir (a thrown error) per
   * consumer ahead of it.
   */
  #claim(files: KeyFiles, header: ValueHeader): number {
    const { consumers } = header;
    for (let tried = 0; tried < consumers; tried++) {
      const slot = (this.rank + tried) % consumers;
      try {
        mkdirSync(files.claim(header.generation, slot));
        return slot;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
    return -1;
  }

  /** The producer removes the value file when it finishes or gives up; a new value is a new file. */
  #stillPublished(held: Held): boolean {
    return isStillAt(held.files.value, held.fd);
  }

  /** See TensorStore.srcRelease: a value the rings carried inside its records needs no finishes. */
  srcRelease(key: string): boolean {
    return this.#rings?.release(key) ?? false;
  }

  /** See TensorStore.landIn: a value from a rank of this node's rings may be copied straight into `into`. */
  landIn(key: string, into: Tensor, options: { from: number }): () => void {
    return this.#rings?.servesGet(options.from, false)
      ? this.#rings.landIn(key, into, options.from)
      : () => {};
  }

  async destFinishGet(key: string, options: StoreFinishOptions = {}): Promise<void> {
    const where = () => `destFinishGet(${JSON.stringify(key)})`;
    checkFinish(options, where);
    const ringHeld = this.#rings?.takeHeld(key);
    if (ringHeld && !ringHeld.inFile) {
      this.#rings?.finish(ringHeld, options);
      return;
    }
    const held = this.#consuming.take(key);
    if (!held) throw noGetError(where, this.rank);
    this.#finish(held, options);
  }

  #finish(held: Held, options: StoreFinishOptions): void {
    const { files, generation, slot } = held;
    const marker = files.done(held.producerRank, generation, slot);
    try {
      held.mapping?.release();
      if (options.error === undefined) closeSync(openSync(marker, 'w', 0o600));
      else this.#writeErrorMarker(marker, options.error, options.mismatch === true);
      // A producer that gave up (timeout, withdrawal) already removed its files: remove ours too.
      if (!this.#stillPublished(held)) {
        removeIfPresent(marker);
        removeIfPresent(files.claim(generation, slot), true);
      }
    } finally {
      closeSync(held.fd);
    }
  }

  /** Written aside and linked into place, so the producer never reads half a message. */
  #writeErrorMarker(marker: string, error: string, mismatch: boolean): void {
    const text = encodeBounded(error, MAX_ERROR_BYTES);
    const content = Buffer.alloc(1 + text.length);
    content[0] = mismatch ? MARKER_MISMATCH : MARKER_LOCAL;
    content.set(text, 1);
    const temp = `${this.#tmp}/${this.rank}.${generationName(this.#nonce, ++this.#counter)}.error`;
    try {
      writeFileSync(temp, content, { mode: 0o600 });
      linkSync(temp, marker);
    } catch (failure) {
      throw asSpaceError(failure, this.dir, content.length, `writing the error marker ${marker}`);
    } finally {
      removeIfPresent(temp);
    }
  }

  nodeRegion(key: string, owner: number, bytes: number): NodeRegion | undefined {
    const where = () => `nodeRegion(${JSON.stringify(key)}, ${owner})`;
    this.#assertUsable(where);
    if (!canMapFiles()) return undefined;
    const path = this.#regionPath(key, owner, where);
    let file = this.#regions.get(path);
    if (!file) {
      file =
        owner === this.rank ? NodeRegionFile.create(this.dir, path, bytes) : NodeRegionFile.open(path, bytes);
      if (!file) return undefined;
      this.#regions.set(path, file);
    }
    return { buffer: file.mapping.buffer, abort: this.#stop(where) };
  }

  releaseNodeRegion(key: string, owner: number): void {
    const path = this.#regionPath(key, owner, () => `releaseNodeRegion(${JSON.stringify(key)})`);
    this.#regions.get(path)?.close();
    this.#regions.delete(path);
  }

  #regionPath(key: string, owner: number, where: () => string): string {
    return NodeRegionFile.path(this.dir, topicOf(key, where), owner);
  }

  nodeDoorbells(): NodeDoorbells | undefined {
    const rings = this.#rings;
    const stop = this.#stop(() => 'a wait on a node region');
    return rings && { park: (ms) => rings.park(ms), ring: (rank) => rings.ringDoorbell(rank), stop };
  }

  /** What ends a wait on this store's shared memory (`where` names it): the store's close, the job's abort. */
  #stop(where: () => string): JobStop {
    return { throwIfAborted: () => this.#assertUsable(where), error: () => this.#unusable(where) };
  }

  /**
   * Stops watching, rejects pending waits, releases mapped values and
   * withdraws values this rank published but did not wait for.
   */
  close(): void {
    if (this.#closed) return;
    this.#rings?.close();
    this.#closed = true;
    this.#watch.close();
    for (const held of this.#consuming.clear()) {
      held.mapping?.release();
      closeSync(held.fd);
    }
    this.#arenaViews.close();
    for (const file of this.#regions.values()) file.close();
    this.#regions.clear();
    for (const [key, produced] of [...this.#produced]) {
      try {
        this.#release(key, produced);
      } catch {
        // A consumer's error about a value nobody waits for any more has no one to go to.
      }
    }
    this.#arenas.close();
  }

  /** close(): `using store = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.dispose](): void {
    this.close();
  }
}

function readMarker(path: string): ConsumerFailure {
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    return {
      error: `a consumer reported an error, but its marker ${path} could not be read: ${error}`,
      mismatch: false,
    };
  }
  const error = content.toString('utf8', 1, Math.min(content.length, 1 + MAX_ERROR_BYTES));
  return { error, mismatch: content[0] === MARKER_MISMATCH };
}

/** Opens a GPU value's allocation in this process; closed when the get finishes. */
function openIpcPayload(opened: OpenedValue, ref: IpcRef, describe: string): ReadValue {
  const { header } = opened;
  const ipc = deviceIpc(`destGet of ${describe}`);
  const { tensor, close } = ipc.openTensor(
    { device: ref.device, handle: readIpcHandle(opened), offset: ref.offset },
    header.shape,
    header.dtype,
  );
  return { tensor, mapping: { release: close } };
}
