/**
 * The FileTensorStore's fast path between the ranks of one node: the
 * TensorStore handshake as records in shared-memory rings, one ring per
 * ordered pair of ranks (Open MPI's sm BTL, NCCL's SHM transport), so a small
 * value costs two copies and, when the consumer sleeps, one doorbell write
 * instead of a value file, a claim directory, a finish marker and the
 * directory events that announce them. Which values take the rings, and the
 * record each becomes (inline, remote, arena, file), is in docs/design.md
 * ("File-store rings"). A consumer keeps what arrives by (producer, key)
 * until a get takes it; what a rank writes to its peers goes through its
 * RingOutbox (ring-outbox.ts).
 *
 * Waits spin on the rings for a moment when every rank of the node has a
 * core, then sleep on the rank's doorbell with a bounded poll as a safety net;
 * the job's abort wakes them through the store.
 */

import type { ByteRing } from '../runtime/byte-ring.ts';
import { CommTimeoutError, RankFailedError } from '../runtime/errors.ts';
import { schedYield } from '../runtime/libc.ts';
import { SpareBuffers } from '../runtime/spare-buffers.ts';
import { SPIN_MS, SpinPolicy } from '../runtime/spin-policy.ts';
import {
  countFinish,
  type FinishTally,
  finishedText,
  throwFailure,
  timeoutText,
  UnfinishedGets,
} from '../runtime/store-bookkeeping.ts';
import { encodeBounded, encodeText, MAX_TAG_BYTES } from '../runtime/store-limits.ts';
import type { StoreEntry, StoreFinishOptions } from '../runtime/tensor-store.ts';
import { sameShape } from '../tensor/shape.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { ArenaViews } from './arena-views.ts';
import { CopyHelper } from './copy-helper.ts';
import { type CrossMemory, crossMemory } from './cross-memory.ts';
import { Doorbell } from './doorbell.ts';
import { FileStoreCorruptError, ShmSpaceError } from './errors.ts';
import { arenaFile } from './file-names.ts';
import type { ProducerArenas } from './producer-arenas.ts';
import { freeBytes } from './reserve-space.ts';
import { RingOutbox } from './ring-outbox.ts';
import {
  decodeRecord,
  finishedRecord,
  type PayloadAt,
  type ValueRecord,
  valueRecord,
  withdrawRecord,
} from './ring-records.ts';
import { RingSegment } from './ring-segment.ts';
import type { ArenaRef } from './value-header.ts';

export interface RingChannelOptions {
  /** The global ranks of this node, this one among them: the ranks with rings between them. */
  ranks: readonly number[];
  /** Data bytes of each ring (a power of two; default from the node's size). */
  ringBytes?: number;
  /** Whether waits spin before sleeping (only worth it while every rank of the machine has a core). */
  spin?: boolean;
  /**
   * Bytes of values received and not taken yet that this rank keeps at most
   * (default 64 MiB); beyond, it leaves them in the rings, whose producers
   * then wait for room.
   */
  maxBufferedBytes?: number;
  /** Whether consumers copy large values straight out of their producers' memory (default: where the system lets them). */
  crossMemory?: boolean;
}

/** What the rings need of their store. */
export interface RingHost {
  dir: string;
  rank: number;
  nonce: number;
  pollMs: number;
  arenas: ProducerArenas;
  arenaViews: ArenaViews;
  /** Throws when the store closed or the job was aborted. */
  assertUsable(where: () => string): void;
}

/**
 * Every rank's inbound rings together take at most this much shared memory
 * (at 16 KiB a ring, a node of over 64 ranks takes more): a node's rings
 * must leave room in a small /dev/shm, as Docker's default of 64 MiB.
 */
const INBOX_BUDGET_BYTES = 1 << 20;
const MIN_RING_BYTES = 16 << 10;
const MAX_RING_BYTES = 256 << 10;
/** Values up to this size travel inside their record (less in rings under 64 KiB). */
const INLINE_MAX_BYTES = 16 << 10;
const DEFAULT_MAX_BUFFERED_BYTES = 64 << 20;
/** What a value received counts against that bound at least: its record, key and bookkeeping. */
const ARRIVAL_MIN_BYTES = 512;
/** Buffers that values copied from a producer's memory went into, kept for the next value of their size. */
const SPARE_MAX_BYTES = 256 << 20;
/**
 * Values that consumers could copy out of the producer's memory are lent
 * from its arenas instead (see set) only while they hold at most this much of
 * the file system, the spare buffers' budget that such values no longer
 * take on the consumers' side,
 */
const LEND_MAX_RESERVED_BYTES = 256 << 20;
/** and only while the file system keeps this much free besides: a small /dev/shm (Docker's 64 MiB) never lends. */
const LEND_KEEP_FREE_BYTES = 256 << 20;

/** The default ring size for a node of `ranks` ranks. */
export function defaultRingBytes(ranks: number): number {
  const share = INBOX_BUDGET_BYTES / Math.max(1, ranks - 1);
  return Math.min(MAX_RING_BYTES, Math.max(MIN_RING_BYTES, 2 ** Math.floor(Math.log2(share))));
}

interface Inbound {
  rank: number;
  ring: ByteRing;
  /** Set once the ring held a record that cannot be one: nothing more is read from it. */
  broken: Error | undefined;
}

interface Arrival {
  from: number;
  id: number;
  record: ValueRecord;
  /** An inline value, copied out of the ring. */
  tensor: Tensor | undefined;
}

interface Produced extends FinishTally {
  /** Held until every consumer finished: consumers may be copying out of its memory. */
  tensor: Tensor;
  sends: Send[];
  region: ArenaRef | undefined;
}

interface Send {
  id: number;
  to: number;
  produced: Produced;
  finished: boolean;
}

/** A get this rank holds: its finish goes back on the ring, or (a value file's) through the file handshake. */
export type RingHeld =
  | { from: number; id: number; inFile: false; spare: ArrayBuffer | undefined }
  | { from: number; inFile: true };

export class RingChannels {
  readonly ranks: ReadonlySet<number>;
  readonly #host: RingHost;
  readonly #index: Map<number, number>;
  readonly #ringBytes: number;
  readonly #spin: SpinPolicy;
  readonly #inbox: RingSegment;
  readonly #bell: Doorbell;
  readonly #inbound: Inbound[];
  readonly #outbox: RingOutbox;
  readonly #arrivals = new Map<string, Arrival[]>();
  readonly #produced = new Map<string, Produced>();
  readonly #sends = new Map<number, Send>();
  readonly #held = new UnfinishedGets<RingHeld>();
  readonly #waiters = new Set<() => void>();
  /** Tensors consumers will copy values into (`${from}/${key}`), see landIn. */
  readonly #landings = new Map<string, Tensor>();
  readonly #spare = new SpareBuffers(SPARE_MAX_BYTES);
  readonly #cross: CrossMemory | undefined;
  /** Copies half of each large value this rank reads out of a producer, where every rank of the node has a core. */
  readonly #copyHelper: CopyHelper | undefined;
  readonly #maxBuffered: number;
  /** Values up to this size travel inside their record: a quarter of a ring, at most INLINE_MAX_BYTES. */
  readonly #inlineMax: number;
  #buffered = 0;
  #nextId = 1;
  #closed = false;

  constructor(host: RingHost, options: RingChannelOptions) {
    const ranks = [...new Set(options.ranks)].sort((a, b) => a - b);
    if (!ranks.includes(host.rank)) {
      throw new RangeError(`FileTensorStore: rings.ranks [${ranks}] must include this rank (${host.rank})`);
    }
    this.#host = host;
    this.ranks = new Set(ranks);
    this.#index = new Map(ranks.map((r, i) => [r, i]));
    this.#ringBytes = options.ringBytes ?? defaultRingBytes(ranks.length);
    this.#inlineMax = Math.min(INLINE_MAX_BYTES, this.#ringBytes / 4);
    this.#spin = new SpinPolicy(options.spin ?? false, { yieldCore: schedYield() ?? undefined });
    this.#maxBuffered = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    this.#cross = options.crossMemory === false ? undefined : crossMemory();
    this.#inbox = RingSegment.create(host.dir, host.rank, ranks.length - 1, this.#ringBytes);
    this.#inbox.setReadsPeers(this.#cross !== undefined);
    try {
      this.#bell = new Doorbell(host.dir, host.rank, () => this.#onRing());
    } catch (error) {
      this.#inbox.close();
      throw error;
    }
    this.#outbox = new RingOutbox(host.dir, host.rank, ranks.length - 1, this.#ringBytes, (owner) =>
      this.#slotIn(owner, host.rank),
    );
    this.#inbound = ranks
      .filter((r) => r !== host.rank)
      .map((rank) => ({ rank, ring: this.#inbox.rings[this.#slotIn(host.rank, rank)], broken: undefined }));
    // Last: nothing after it throws, so a store that failed to open holds no share of the helper.
    this.#copyHelper = this.#cross && options.spin ? CopyHelper.acquire() : undefined;
  }

  /** The ring of `owner`'s inbox that `sender` writes. */
  #slotIn(owner: number, sender: number): number {
    const s = this.#index.get(sender) as number;
    return s < (this.#index.get(owner) as number) ? s : s - 1;
  }

  /** Whether a value for `to` goes through the rings. */
  servesSet(consumers: number, to: readonly number[] | undefined): to is readonly number[] {
    if (this.#closed || to === undefined || consumers === 0 || to.length !== consumers) return false;
    return to.every((r) => r !== this.#host.rank && this.ranks.has(r));
  }

  /** Whether a get from `from` looks in the rings. */
  servesGet(from: number | undefined, pull: boolean | undefined): boolean {
    return !this.#closed && !pull && from !== undefined && from !== this.#host.rank && this.ranks.has(from);
  }

  produces(key: string): boolean {
    return this.#produced.has(key);
  }

  claimed(key: string): boolean {
    return this.#produced.get(key)?.sends.some((s) => s.finished) ?? false;
  }

  /**
   * Pushes the value to its consumers; false (nothing sent) when it is too
   * large for a record and the arenas have no room: the store then puts it in
   * a value file and announces that with announceFile. A large value goes
   * where consumers that can read this process copy it from (cross-memory),
   * or through the arena to those that cannot; through the arena to all
   * when they read it in place (`readInPlace`, StoreSetOptions) and there is
   * room: a copy into a buffer of theirs would be one copy more, and a
   * cross-process copy is the slower kind (the kernel pins and copies the
   * other process's pages one by one, where memcpy streams through memory
   * both map).
   */
  set(
    key: string,
    tensor: Tensor,
    to: readonly number[],
    tag: string,
    where: string,
    readInPlace = false,
  ): boolean {
    const large = tensor.nbytes > this.#inlineMax;
    const cross = large ? this.#cross : undefined;
    const remote: PayloadAt | undefined = cross && {
      at: 'remote',
      pid: process.pid,
      address: cross.addressOf(tensor.bytes()),
    };
    const readsUs = (consumer: number) => remote !== undefined && this.#outbox.readsPeers(consumer);
    let region: ArenaRef | undefined;
    if (large && !to.every(readsUs)) {
      region = this.#host.arenas.store(tensor.bytes(), where);
      if (!region) return false;
    } else if (large && readInPlace) region = this.#lend(tensor, where);
    const produced: Produced = { tensor, sends: [], unfinished: to.length, region, failure: undefined };
    for (const consumer of to) {
      const payload: PayloadAt = !large
        ? { at: 'inline' }
        : region === undefined || (readsUs(consumer) && !readInPlace)
          ? (remote as PayloadAt)
          : { at: 'arena', ref: region, nonce: this.#host.nonce };
      this.#send(key, tensor, [consumer], tag, payload, produced);
    }
    this.#produced.set(key, produced);
    return true;
  }

  /**
   * The value in an arena region for consumers that could as well copy it
   * out of this process; undefined, leaving them to, when that would take
   * more of the file system than lending may (LEND_MAX_RESERVED_BYTES,
   * LEND_KEEP_FREE_BYTES) or the file system is full.
   */
  #lend(tensor: Tensor, where: string): ArenaRef | undefined {
    const arenas = this.#host.arenas;
    const admits = (growth: number) =>
      arenas.reservedBytes + growth <= LEND_MAX_RESERVED_BYTES &&
      freeBytes(this.#host.dir) >= growth + LEND_KEEP_FREE_BYTES;
    try {
      return arenas.store(tensor.bytes(), where, admits);
    } catch (error) {
      if (error instanceof ShmSpaceError) return undefined;
      throw error;
    }
  }

  /**
   * The consumer will copy the value `from` sends under `key` into `into`: a
   * value in the producer's memory is then copied there directly, and get
   * hands out a tensor over `into` (see TensorStore.landIn).
   */
  landIn(key: string, into: Tensor, from: number): () => void {
    const arrivalKey = `${from}/${key}`;
    if (into.device !== 'cpu' || !into.isContiguous() || into.nbytes <= this.#inlineMax) return () => {};
    this.#landings.set(arrivalKey, into);
    return () => {
      if (this.#landings.get(arrivalKey) === into) this.#landings.delete(arrivalKey);
    };
  }

  /** Tells the consumers that the value under `key` waits in a value file (the file handshake serves it). */
  announceFile(key: string, tensor: Tensor, to: readonly number[], tag: string): void {
    this.#send(key, tensor, to, tag, { at: 'file' }, undefined);
  }

  #send(
    key: string,
    tensor: Tensor,
    to: readonly number[],
    tag: string,
    payload: PayloadAt,
    produced: Produced | undefined,
  ): void {
    const keyBytes = encodeText(key);
    const tagBytes = encodeBounded(tag, MAX_TAG_BYTES);
    for (const consumer of to) {
      const id = this.#nextId++ >>> 0;
      if (produced) {
        const send = { id, to: consumer, produced, finished: false };
        produced.sends.push(send);
        this.#sends.set(id, send);
      }
      this.#outbox.write(consumer, valueRecord(id, keyBytes, tagBytes, tensor, payload));
    }
  }

  /**
   * Lets go of a value that travelled inside its records, without waiting for
   * its consumers (TensorStore.srcRelease): they take it as usual, and their
   * finishes find nobody. False for a value they read from this rank's memory.
   */
  release(key: string): boolean {
    const produced = this.#produced.get(key);
    if (!produced || produced.tensor.nbytes > this.#inlineMax) return false;
    this.#produced.delete(key);
    for (const send of produced.sends) this.#sends.delete(send.id);
    return true;
  }

  /** Waits until every consumer finished the value (see TensorStore.srcWaitUntilGetFinished). */
  async waitFinished(key: string, timeoutMs: number, where: () => string): Promise<void> {
    const produced = this.#produced.get(key) as Produced;
    try {
      await this.#waitFor(
        () => (produced.unfinished === 0 ? true : undefined),
        timeoutMs,
        where,
        () => timeoutText(where, timeoutMs, this.#host.rank, this.#progress(produced)),
      );
    } catch (error) {
      // A closed store withdrew it as it closed, and its peers' rings may be gone since.
      if (!this.#closed) this.#withdraw(produced);
      throw error;
    } finally {
      this.#produced.delete(key);
      for (const send of produced.sends) this.#sends.delete(send.id);
    }
    if (produced.region) this.#host.arenas.free(produced.region);
    throwFailure(produced);
  }

  #progress(p: Produced): string {
    const waiting = p.sends.filter((s) => !s.finished).map((s) => s.to);
    return (
      `${finishedText(p.sends.length - waiting.length, p.sends.length)}; ` +
      `waiting for rank${waiting.length === 1 ? '' : 's'} ${waiting.join(', ')}`
    );
  }

  /**
   * Takes unfinished sends back so no consumer takes them for the key's next
   * value. A consumer may already hold a view of the arena region: then the
   * region is never reused.
   */
  #withdraw(p: Produced): void {
    for (const send of p.sends) if (!send.finished) this.#outbox.write(send.to, [withdrawRecord(send.id)]);
  }

  /**
   * The value `from` pushed under `key`, taken for this rank; 'file' when it
   * waits in a value file (the caller gets it through the file handshake and
   * finishes it with finishGet, as any other).
   */
  async get(key: string, from: number, timeoutMs: number, where: () => string): Promise<StoreEntry | 'file'> {
    const arrivalKey = `${from}/${key}`;
    const arrival = await this.#waitFor(
      () => this.#arrivals.get(arrivalKey)?.[0],
      timeoutMs,
      where,
      () =>
        timeoutText(
          where,
          timeoutMs,
          this.#host.rank,
          `rank ${from} has not sent a value under this key` +
            (this.#buffered >= this.#maxBuffered
              ? ` that this rank read: it holds ${this.#arrivalCount()} values not taken yet (${this.#buffered} ` +
                `bytes, its limit of maxBufferedBytes), and reads no more until some are taken`
              : ''),
        ),
      from,
    );
    this.#take(arrivalKey, arrival);
    const { record } = arrival;
    if (record.payload.at === 'file') {
      this.#held.add(key, { from, inFile: true });
      return 'file';
    }
    let tensor = arrival.tensor;
    let spare: ArrayBuffer | undefined;
    if (record.payload.at === 'remote') {
      const landing = this.#landings.get(arrivalKey);
      this.#landings.delete(arrivalKey);
      let into: Tensor;
      // Only a value just like the wish lands: one of another kind must leave the receiver's tensor alone.
      if (landing && landing.dtype === record.dtype && sameShape(landing.shape, record.shape)) into = landing;
      else {
        spare = this.#spare.take(record.nbytes) ?? new ArrayBuffer(record.nbytes);
        into = Tensor.fromBuffer(spare, 0, record.shape, record.dtype);
      }
      try {
        (this.#cross as CrossMemory).read(
          record.payload.pid,
          record.payload.address,
          into.bytes(),
          this.#copyHelper,
        );
      } catch (error) {
        const message =
          `rank ${this.#host.rank} could not copy the value of key ${JSON.stringify(key)} ` +
          `from rank ${from}: ${(error as Error).message}`;
        this.#outbox.write(from, [finishedRecord(arrival.id, { error: message })]);
        throw new RankFailedError(message, from);
      }
      tensor = into;
    } else if (record.payload.at === 'arena') {
      const { ref, nonce } = record.payload;
      const path = arenaFile(this.#host.dir, from, nonce, ref.index);
      const describe = `the value of key ${JSON.stringify(key)} from rank ${from}`;
      let buffer: ArrayBuffer | undefined;
      try {
        buffer = this.#host.arenaViews.view(path, ref.offset, record.nbytes, describe);
        if (!buffer)
          throw new FileStoreCorruptError(`${describe} is in arena file ${path}, which does not exist`);
      } catch (error) {
        this.#outbox.write(from, [
          finishedRecord(arrival.id, { error: `rank ${this.#host.rank}: ${(error as Error).message}` }),
        ]);
        throw error;
      }
      tensor = Tensor.fromBuffer(buffer, ref.offset, record.shape, record.dtype);
    }
    this.#held.add(key, { from, id: arrival.id, inFile: false, spare });
    return { tensor: tensor as Tensor, tag: record.tag, producerRank: from };
  }

  #arrivalCount(): number {
    let count = 0;
    for (const list of this.#arrivals.values()) count += list.length;
    return count;
  }

  #take(arrivalKey: string, arrival: Arrival): void {
    const list = this.#arrivals.get(arrivalKey) as Arrival[];
    list.shift();
    if (list.length === 0) this.#arrivals.delete(arrivalKey);
    this.#buffered -= arrivalBytes(arrival);
  }

  /** The oldest unfinished get of `key` these rings handed out, taken off the list; undefined if none. */
  takeHeld(key: string): RingHeld | undefined {
    return this.#held.take(key);
  }

  /** Sends a get's finish back to its producer. */
  finish(held: RingHeld & { inFile: false }, options: StoreFinishOptions): void {
    this.#outbox.write(held.from, [finishedRecord(held.id, options)]);
    if (held.spare) this.#spare.give(held.spare);
  }

  /**
   * Runs `attempt` until it yields, reading the rings in between: spinning
   * for a moment if allowed, then asleep on the doorbell or the poll timer.
   * `from`: the producer waited for, whose broken ring fails the wait.
   */
  async #waitFor<T>(
    attempt: () => T | undefined,
    timeoutMs: number,
    where: () => string,
    describe: () => string,
    from?: number,
  ): Promise<T> {
    const deadline = performance.now() + timeoutMs;
    for (let spun = false; ; ) {
      this.#host.assertUsable(where);
      this.#service();
      const result = attempt();
      if (result !== undefined) return result;
      this.#assertReadable(from, where);
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new CommTimeoutError(describe());
      // The peers this burst wrote to are woken before this rank spins or sleeps.
      this.#outbox.ringDue();
      if (!spun && this.#spin.pays()) {
        spun = true;
        if (this.#spin.spin(this.#lookForRecord, Math.min(SPIN_MS, remaining))) continue;
      }
      this.#inbox.sleeping();
      try {
        this.#service();
        const ready = attempt();
        if (ready !== undefined) return ready;
        await this.park(Math.min(remaining, this.#host.pollMs));
      } finally {
        this.#inbox.awake();
      }
    }
  }

  /** Whether some inbound ring holds a record, looked at in rounds: one costs less than a reading of the clock. */
  readonly #lookForRecord = (): boolean => {
    for (let round = 0; round < 16; round++) {
      for (const inbound of this.#inbound) if (inbound.ring.hasRecord()) return true;
    }
    return false;
  };

  #assertReadable(from: number | undefined, where: () => string): void {
    const broken = from === undefined ? undefined : this.#inbound.find((i) => i.rank === from)?.broken;
    if (broken) throw new RankFailedError(`${where()} on rank ${this.#host.rank}: ${broken.message}`, from);
  }

  #onRing(): void {
    if (this.#closed) return;
    this.#service();
    this.wakeAll();
  }

  /** Resolves at the next ring of this rank's doorbell (or wakeAll), or once `ms` passed. */
  park(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#waiters.add(wake);
    });
  }

  /** Rings `rank`'s doorbell, whether it sleeps or not: a wait of its, parked on it, has something to look at. */
  ringDoorbell(rank: number): void {
    this.#outbox.wake(rank);
  }

  /** Wakes every wait to look again (a record arrived, the job was aborted, the store closed). */
  wakeAll(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /** Reads every inbound ring, then writes what waited for room. */
  #service(): void {
    for (const inbound of this.#inbound) this.#read(inbound);
    this.#outbox.flushPending();
  }

  #read(inbound: Inbound): void {
    const { ring } = inbound;
    while (!inbound.broken && this.#buffered < this.#maxBuffered) {
      const body = ring.peek();
      if (body === undefined) break;
      try {
        if (typeof body === 'number') throw new RangeError(`a record declares ${body} bytes`);
        this.#dispatch(inbound.rank, body);
      } catch (error) {
        inbound.broken = new FileStoreCorruptError(
          `the ring from rank ${inbound.rank} to rank ${this.#host.rank} is corrupt: ${(error as Error).message}`,
        );
        break;
      }
      ring.release();
    }
    // The producer marked that it waits for room: it is told once records were freed,
    // rung whether it sleeps or not: it has records queued, not a wait that would look at the rings.
    if (ring.takeBlocked()) this.#outbox.wake(inbound.rank);
  }

  #dispatch(from: number, body: Uint8Array): void {
    const record = decodeRecord(body);
    if (record.type === 'value') {
      let tensor: Tensor | undefined;
      if (record.payload.at === 'inline') {
        // The ring's bytes are reused once released: an inline value is copied out.
        tensor = Tensor.fromBuffer(record.payload.bytes.slice().buffer, 0, record.shape, record.dtype);
        record.payload = { at: 'inline', bytes: new Uint8Array(0) };
      }
      const arrivalKey = `${from}/${record.key}`;
      const arrival = { from, id: record.id, record, tensor };
      this.#buffered += arrivalBytes(arrival);
      const list = this.#arrivals.get(arrivalKey);
      if (list) list.push(arrival);
      else this.#arrivals.set(arrivalKey, [arrival]);
    } else if (record.type === 'finished') {
      const send = this.#sends.get(record.id);
      if (!send || send.finished || send.to !== from) return;
      send.finished = true;
      countFinish(send.produced, record.failure);
    } else {
      for (const [arrivalKey, list] of this.#arrivals) {
        const at = list.findIndex((a) => a.from === from && a.id === record.id);
        if (at < 0) continue;
        const [gone] = list.splice(at, 1);
        this.#buffered -= arrivalBytes(gone);
        if (list.length === 0) this.#arrivals.delete(arrivalKey);
        return;
      }
    }
  }

  /** Withdraws values nobody waited for, wakes every wait (they fail: the store closed) and unmaps. */
  close(): void {
    if (this.#closed) return;
    for (const produced of this.#produced.values()) this.#withdraw(produced);
    this.#closed = true;
    this.wakeAll();
    this.#bell.close();
    this.#inbox.close();
    this.#outbox.close();
    this.#arrivals.clear();
    this.#produced.clear();
    this.#sends.clear();
    this.#held.clear();
    this.#landings.clear();
    this.#spare.clear();
    this.#copyHelper?.release();
  }
}

/** What a value received and not yet taken holds of this rank's memory. */
function arrivalBytes(arrival: Arrival): number {
  return Math.max(ARRIVAL_MIN_BYTES, arrival.tensor?.nbytes ?? 0);
}
