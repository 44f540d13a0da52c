/**
 * NetworkTensorStore: the TensorStore handshake between processes on
 * different machines, over TCP. It pushes, as a send does: srcSet writes the
 * value to each consumer's connection at once (its header, then the tensor's
 * own bytes), the consumer's store reads it into a tensor of its own and
 * keeps it until a destGet takes it (within a budget of buffered bytes), and
 * destFinishGet sends the producer a finish, carrying the consumer's error if
 * it failed. A producer that gives up on a value (its wait timed out)
 * withdraws it, so a consumer never takes it for the key's next value.
 *
 * Every pair of ranks shares one connection, made once by connect() and
 * reused: the lower rank dials, and both ends prove they hold the job's
 * secret (handshake.ts). A peer whose connection ends fails every wait that
 * involves it and no other. As with every store, the tensor a consumer gets
 * is valid until its destFinishGet: the buffer of a large value is then
 * reused for the next value of its size (no page faults, no zeroing, no
 * garbage per transfer). Where every rank of the machine has a core (`spin`),
 * a wait first spins for a moment reading its peers' sockets itself: the
 * answer of a running peer is taken at once, without a wake-up of this
 * process or a turn of its event loop.
 */
import net from 'node:net';
import { FrameDecoder } from '../rendezvous/protocol.ts';
import { CommTimeoutError, InvalidStateError, type RankFailedError } from '../runtime/errors.ts';
import { schedYield } from '../runtime/libc.ts';
import { type NetworkBytes, type NetworkStats, networkStatsOf } from '../runtime/network-stats.ts';
import { SpareBuffers } from '../runtime/spare-buffers.ts';
import { SPIN_MS, SpinPolicy } from '../runtime/spin-policy.ts';
import {
  alreadySetError,
  checkFinish,
  checkSet,
  checkTimeout,
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
} from '../runtime/store-bookkeeping.ts';
import { encodeBounded, MAX_TAG_BYTES } from '../runtime/store-limits.ts';
import type {
  StoreEntry,
  StoreFinishOptions,
  StoreSetOptions,
  StoreWaitOptions,
  TensorStore,
} from '../runtime/tensor-store.ts';
import { Tensor } from '../tensor/tensor.ts';
import { dial, type NetworkPeer } from './dial.ts';
import { NetworkStoreBufferError, NetworkStoreHandshakeError } from './errors.ts';
import { acceptorHandshake, type LocalIdentity, type PeerHello } from './handshake.ts';
import { type Arrival, type Budget, Inbox } from './inbox.ts';
import {
  checkOptions,
  checkPeers,
  type NetworkConnectOptions,
  type NetworkStoreOptions,
  type Settings,
} from './options.ts';
import { COPY_MAX_BYTES, PeerConnection, type PeerEvents } from './peer-connection.ts';
import { Wakers, waitUntil } from './wait-until.ts';
import { Wants } from './wants.ts';
import { checkKey, type Finished, FRAME_LIMIT, MAX_STATUS_BYTES, type ValueHeader } from './wire.ts';

/** The wakers' topics: connect's, a get's (by producer and key) and a finish's (by key). */
const CONNECT_TOPIC = 'c';
const getTopic = (from: number, key: string) => `g${from}/${key}`;
const finishTopic = (key: string) => `f${key}`;
/** Asks for values not offered yet that a store remembers, at most. */
const MAX_WANTS = 4096;
/** Finished buffers kept for reuse, at most. */
const SPARE_MAX_BYTES = 512 << 20;

interface Link {
  conn: PeerConnection;
  inbox: Inbox;
}

interface Produced extends FinishTally {
  key: string;
  /** A value set without `to`: sent to the peers that ask, while `left` of its consumers are to come. */
  offer: { tensor: Tensor; tag: Uint8Array; left: number } | undefined;
  sends: Send[];
}

/** A value on its way to one consumer. */
interface Send {
  id: number;
  link: Link;
  produced: Produced;
  finished: boolean;
  /** Whether its bytes left for the network (for timeout messages). */
  sent: boolean;
  /** Whether its bytes were copied when it was sent, so the producer's tensor is free at once. */
  copied: boolean;
}

const copiedAtSend = (send: Send) => send.copied;

/** A get this rank made and has not finished. */
interface Held {
  link: Link;
  id: number;
  /** Its buffer, to reuse once finished (large values only). */
  reusable: ArrayBuffer | undefined;
  /** Whether it was copied when it was sent: its producer may not wait for the finish, which can wait a little. */
  small: boolean;
}

/** Values at least this large arrive in reused buffers. */
const REUSE_MIN_BYTES = 64 << 10;

export class NetworkTensorStore implements TensorStore {
  readonly rank: number;
  /** Where this rank listens: what its peers pass to connect(). */
  readonly address: { host: string; port: number };
  readonly #local: LocalIdentity;
  readonly #server: net.Server;
  readonly #timeoutMs: number;
  readonly #handshakeTimeoutMs: number;
  readonly #onRefused: (error: NetworkStoreHandshakeError) => void;
  readonly #spin: SpinPolicy;
  readonly #budget: Budget;
  readonly #links = new Map<number, Link>();
  /** Bytes each peer's connection carried, kept after the connection ends (networkStats). */
  readonly #traffic = new Map<number, NetworkBytes>();
  /** Connections that reached the server, while they are open. */
  readonly #accepted = new Set<net.Socket>();
  readonly #wakers = new Wakers();
  readonly #produced = new Map<string, Produced>();
  readonly #sends = new Map<number, Send>();
  /** Peers' asks for values not offered yet. */
  readonly #wants = new Wants(MAX_WANTS);
  /** Values this rank asked a peer for and has not taken yet (`${from}/${key}`), so it asks once. */
  readonly #asked = new Set<string>();
  readonly #consuming = new UnfinishedGets<Held>();
  readonly #spare = new SpareBuffers(SPARE_MAX_BYTES);
  /** Where consumers want values to land (`${from}/${key}`), see landIn. */
  readonly #landing = new Map<string, Tensor>();
  /** Values that arrived in a consumer's own tensor: their memory is never a spare buffer. */
  readonly #landed = new WeakSet<Tensor>();
  /** The peers connect() was given (without this rank). */
  #peers: Map<number, NetworkPeer> | undefined;
  #connected = false;
  #dialing: AbortController | undefined;
  #nextId = 0;
  #closed = false;

  /** Listens on `host` (a free port) and resolves to the store; connect() then joins the peers. */
  static async listen(options: NetworkStoreOptions): Promise<NetworkTensorStore> {
    const settings = checkOptions(options);
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, settings.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // A failed accept is the peer's problem, reported by its own connect; the server goes on.
    server.on('error', () => {});
    server.unref();
    return new NetworkTensorStore(server, (server.address() as net.AddressInfo).port, settings);
  }

  private constructor(server: net.Server, port: number, settings: Settings) {
    this.rank = settings.local.rank;
    this.address = { host: settings.host, port };
    this.#server = server;
    this.#local = settings.local;
    this.#timeoutMs = settings.timeoutMs;
    this.#handshakeTimeoutMs = settings.handshakeTimeoutMs;
    this.#budget = { used: 0, limit: settings.maxBufferedBytes };
    this.#onRefused = settings.onRefused;
    // Reading a socket without the event loop takes libc's recv (Linux with glibc).
    const yieldCore = settings.spin ? schedYield() : null;
    this.#spin = new SpinPolicy(yieldCore !== null, { yieldCore: yieldCore ?? undefined });
    server.on('connection', (socket) => this.#accept(socket));
  }

  /**
   * Connects to every peer (an entry for this rank itself is skipped): dials
   * those of higher rank, waits for those of lower rank to dial, and resolves
   * once all are connected and authenticated. Called once.
   */
  async connect(peers: readonly NetworkPeer[], options: NetworkConnectOptions = {}): Promise<void> {
    const where = () => 'NetworkTensorStore.connect';
    this.#assertOpen(where);
    if (this.#peers)
      throw new InvalidStateError(`${where()}: rank ${this.rank} connects once; its connections are reused`);
    const expected = checkPeers(peers, this.rank, where());
    const timeoutMs = checkTimeout(options.timeoutMs ?? this.#timeoutMs, where);
    this.#peers = expected;
    for (const [rank, link] of this.#links) {
      if (expected.has(rank)) continue;
      this.#links.delete(rank);
      link.conn.close(`rank ${rank} is not among the peers of rank ${this.rank}`);
    }
    const dialing = new AbortController();
    this.#dialing = dialing;
    const deadline = performance.now() + timeoutMs;
    const lastTry = new Map<number, string>();
    let refused: Error | undefined;
    for (const peer of expected.values()) {
      if (peer.rank < this.rank) continue;
      dial(peer, this.#local, {
        deadline,
        signal: dialing.signal,
        handshakeTimeoutMs: this.#handshakeTimeoutMs,
        failedTry: (reason) => lastTry.set(peer.rank, reason),
      }).then(
        (d) => this.#adopt(d.socket, d.decoder, d.hello, `${peer.host}:${peer.port}`),
        (error: Error) => {
          // Other failures are tries that ran out of time: the timeout below names them.
          if (error instanceof NetworkStoreHandshakeError) refused ??= error;
          this.#wakers.wake(CONNECT_TOPIC);
        },
      );
    }
    try {
      await waitUntil(
        () => {
          this.#assertOpen(where);
          if (refused) throw refused;
          let all = true;
          for (const rank of expected.keys()) {
            const link = this.#links.get(rank);
            if (link?.conn.failure) throw rankFailure(where, this.rank, link.conn.failure);
            all &&= link !== undefined;
          }
          return all || undefined;
        },
        this.#wakers,
        CONNECT_TOPIC,
        timeoutMs,
        () =>
          new CommTimeoutError(
            `${where()} timed out after ${timeoutMs} ms on rank ${this.rank}: ${this.#missing(expected, lastTry)}`,
          ),
      );
    } catch (error) {
      dialing.abort();
      throw error;
    }
    this.#connected = true;
  }

  #missing(expected: Map<number, NetworkPeer>, lastTry: Map<number, string>): string {
    const missing = [...expected.values()].filter((peer) => !this.#links.has(peer.rank));
    const described = missing.map((peer) => {
      const at = `${peer.host}:${peer.port}`;
      return peer.rank > this.rank
        ? `rank ${peer.rank} at ${at} could not be reached (${lastTry.get(peer.rank) ?? 'no answer yet'})`
        : `rank ${peer.rank} (${at}) did not connect`;
    });
    return `${expected.size - missing.length} of ${expected.size} peers connected; ${described.join('; ')}`;
  }

  #accept(socket: net.Socket): void {
    if (this.#closed) return void socket.destroy();
    this.#accepted.add(socket);
    socket.once('close', () => this.#accepted.delete(socket));
    socket.unref();
    socket.setNoDelay(true);
    // 'close' follows an error, and the handshake or the connection reports it.
    socket.on('error', () => {});
    const decoder = new FrameDecoder(FRAME_LIMIT);
    acceptorHandshake(socket, decoder, this.#local, this.#handshakeTimeoutMs, {
      admit: (peer) => this.#admission(peer.rank),
      accepted: (peer) => this.#adopt(socket, decoder, peer, `${socket.remoteAddress}:${socket.remotePort}`),
      refused: (error) => this.#onRefused(error),
    });
  }

  /** Why a peer that proved it belongs to the job may not stay, or undefined when it may. */
  #admission(rank: number): string | undefined {
    if (this.#closed) return `the store of rank ${this.rank} is closed`;
    if (rank >= this.rank)
      return `rank ${rank} dialed rank ${this.rank}, but of two ranks the lower one dials`;
    if (this.#links.has(rank)) return `rank ${rank} is already connected`;
    if (this.#peers && !this.#peers.has(rank))
      return `rank ${rank} is not among the peers of rank ${this.rank}`;
    return undefined;
  }

  #adopt(socket: net.Socket, decoder: FrameDecoder, peer: PeerHello, address: string): void {
    if (this.#closed) return void socket.destroy();
    let traffic = this.#traffic.get(peer.rank);
    if (!traffic) {
      traffic = { sentBytes: 0, receivedBytes: 0 };
      this.#traffic.set(peer.rank, traffic);
    }
    const conn = new PeerConnection(socket, decoder, peer, this.#local, address, this.#events, traffic);
    this.#links.set(peer.rank, { conn, inbox: new Inbox(this.#budget) });
    conn.start();
    this.#wakers.wake(CONNECT_TOPIC);
  }

  /**
   * The bytes this rank sent to and received from each peer since its
   * connection's handshake, frames whole (headers included), and their sums;
   * the handshakes' own few hundred bytes are not counted.
   */
  networkStats(): NetworkStats {
    return networkStatsOf(this.#traffic);
  }

  /**
   * Where the status rows peers share arrive (the rank's debug status board,
   * so a hang report also describes the ranks of other nodes).
   */
  onPeerStatus: ((rank: number, row: Uint8Array) => void) | undefined;

  /** Sends this rank's status row (JSON, at most MAX_STATUS_BYTES) to every peer. */
  shareStatus(row: Uint8Array): void {
    if (this.#closed) return;
    if (row.byteLength > MAX_STATUS_BYTES) {
      throw new RangeError(`shareStatus: a row of ${row.byteLength} bytes exceeds ${MAX_STATUS_BYTES}`);
    }
    for (const { conn } of this.#links.values()) conn.sendStatus(row);
  }

  readonly #events: PeerEvents = {
    valueStarts: (peer, header) => this.#valueStarts(peer, header),
    valueArrived: (peer, header, tensor) => {
      this.#arrived(peer, header.key, { id: header.id, tag: header.tag, tensor });
    },
    finished: (peer, finished) => this.#finished(peer, finished),
    withdrawn: (peer, id) => this.#linkOf(peer).inbox.withdraw(id),
    status: (peer, row) => this.onPeerStatus?.(peer.rank, row),
    wanted: (peer, key) => this.#wanted(peer.rank, key),
    lost: (peer) => {
      // Values that arrived whole stay to be taken (a peer may close right after its last value, which it
      // did not wait for: srcRelease); the one that was still arriving never will.
      this.#linkOf(peer).inbox.unreserve(peer.reservedArriving);
      this.#wakers.wakeAll();
    },
  };

  #linkOf(peer: PeerConnection): Link {
    return this.#links.get(peer.rank)!;
  }

  /** The tensor a value's bytes go into; refused (the producer told, the get to fail) when over budget. */
  #valueStarts(peer: PeerConnection, header: ValueHeader): Tensor | undefined {
    const { inbox } = this.#linkOf(peer);
    // Only a refusal needs the words: not built for every value.
    const what = () =>
      `the value of key ${JSON.stringify(header.key)} from rank ${peer.rank} (${header.nbytes} bytes)`;
    let refusal: string;
    if (inbox.reserve(header.nbytes)) {
      const into = this.#landingFor(peer.rank, header);
      if (into) return into;
      try {
        // A plain ArrayBuffer: the value stays in this process, and allocating shared memory per value is slow.
        const buffer = this.#spare.take(header.nbytes) ?? new ArrayBuffer(header.nbytes);
        return Tensor.fromBuffer(buffer, 0, header.shape, header.dtype);
      } catch (error) {
        inbox.unreserve(header.nbytes);
        refusal = `rank ${this.rank} could not allocate ${what()}: ${(error as Error).message}`;
      }
    } else {
      refusal =
        `rank ${this.rank} refused ${what()}: it holds ${this.#budget.used} bytes of values no get took yet, ` +
        `and its maxBufferedBytes is ${this.#budget.limit}`;
    }
    peer.sendFinished(header.id, { error: refusal });
    this.#arrived(peer, header.key, { id: header.id, refusal });
    return undefined;
  }

  /** The consumer's own memory for a value it asked to land there (landIn), if it fits the value. */
  #landingFor(from: number, header: ValueHeader): Tensor | undefined {
    if (this.#landing.size === 0) return undefined;
    const wish = `${from}/${header.key}`;
    const into = this.#landing.get(wish);
    if (!into) return undefined;
    this.#landing.delete(wish);
    if (into.nbytes !== header.nbytes || into.dtype !== header.dtype) return undefined;
    const tensor = Tensor.fromBuffer(into.data.buffer, into.data.byteOffset, header.shape, header.dtype);
    this.#landed.add(tensor);
    return tensor;
  }

  /**
   * The value of `key` from `options.from` may be written straight into
   * `into` (a contiguous host tensor) as it arrives, instead of into a buffer
   * of the store's that the consumer then copies from: the consumer holds
   * `into` for it until it finishes the value. Returns the function that
   * forgets the wish if no value came yet.
   */
  landIn(key: string, into: Tensor, options: { from: number }): () => void {
    if (into.device !== 'cpu' || !into.isContiguous() || this.#closed) return () => {};
    const wish = `${options.from}/${key}`;
    this.#landing.set(wish, into);
    return () => {
      if (this.#landing.get(wish) === into) this.#landing.delete(wish);
    };
  }

  #arrived(peer: PeerConnection, key: string, arrival: Arrival): void {
    this.#linkOf(peer).inbox.put(key, arrival);
    this.#wakers.wake(getTopic(peer.rank, key));
  }

  #finished(peer: PeerConnection, { id, failure }: Finished): void {
    const send = this.#sends.get(id);
    // A finish of a value given up on (or of no value of ours) has nobody waiting for it.
    if (!send || send.link.conn !== peer || send.finished) return;
    send.finished = true;
    const p = send.produced;
    if (countFinish(p, failure)) this.#wakers.wake(finishTopic(p.key));
  }

  async srcSet(key: string, tensor: Tensor, consumers: number, options: StoreSetOptions = {}): Promise<void> {
    const where = () => `srcSet(${JSON.stringify(key)})`;
    this.#assertOpen(where);
    checkSet(key, tensor, consumers, options, where);
    if (tensor.device !== 'cpu') {
      throw new TypeError(
        `${where()}: tensor ${tensor.describe()} is on ${tensor.device}; the network store carries host tensors ` +
          '(GPU tensors on different nodes go over NCCL)',
      );
    }
    const { to } = options;
    // Without `to` the value is offered: it goes to whichever peers ask for it (destGet with pull).
    this.#assertConnected(where);
    const links = to === undefined ? [] : to.map((rank) => this.#link(rank, where));
    if (this.#produced.has(key)) throw alreadySetError(where);
    for (const { conn } of links) {
      if (conn.failure) throw rankFailure(where, this.rank, conn.failure);
      if (tensor.nbytes > conn.maxValueBytes) {
        throw new RangeError(
          `${where()}: the value has ${tensor.nbytes} bytes, over the maxValueBytes ${conn.maxValueBytes} of rank ${conn.rank}`,
        );
      }
    }
    const tag = encodeBounded(options.tag ?? '', MAX_TAG_BYTES);
    const produced: Produced = {
      key,
      sends: [],
      unfinished: consumers,
      failure: undefined,
      offer: to === undefined ? { tensor, tag, left: consumers } : undefined,
    };
    for (const link of links) this.#send(produced, link, tensor, tag);
    this.#produced.set(key, produced);
    const waiting = this.#wants.take(key);
    for (const rank of waiting) this.#wanted(rank, key);
  }

  #send(produced: Produced, link: Link, tensor: Tensor, tag: Uint8Array): void {
    const send: Send = {
      id: this.#nextId,
      link,
      produced,
      finished: false,
      sent: false,
      copied: tensor.nbytes <= COPY_MAX_BYTES,
    };
    this.#nextId = (this.#nextId + 1) >>> 0;
    this.#sends.set(send.id, send);
    produced.sends.push(send);
    link.conn.sendValue(send.id, produced.key, tag, tensor, () => {
      send.sent = true;
    });
  }

  /** A peer asks for an offered value: it gets it if one of the value's consumers is still to come. */
  #wanted(rank: number, key: string): void {
    const link = this.#links.get(rank);
    if (!link) return;
    const produced = this.#produced.get(key);
    const offer = produced?.offer;
    if (!produced || !offer) {
      // Not offered yet: answered when it is (the wants are bounded; beyond, the asker times out).
      this.#wants.add(key, rank);
      return;
    }
    if (offer.left === 0) return;
    offer.left--;
    this.#send(produced, link, offer.tensor, offer.tag);
  }

  claimed(key: string): boolean {
    const p = this.#produced.get(key);
    return p !== undefined && p.sends.length > 0;
  }

  async srcWaitUntilGetFinished(key: string, options: StoreWaitOptions = {}): Promise<void> {
    const where = () => `srcWaitUntilGetFinished(${JSON.stringify(key)})`;
    const timeoutMs = checkWait(options, this.#timeoutMs, where);
    const produced = this.#produced.get(key);
    if (!produced) throw notSetError(where, this.rank);
    const look = () => {
      this.#assertOpen(where);
      const lost = produced.sends.find((send) => !send.finished && send.link.conn.failure);
      if (lost) throw rankFailure(where, this.rank, lost.link.conn.failure!);
      return produced.unfinished === 0 || undefined;
    };
    try {
      const readers = () => produced.sends.filter((send) => !send.finished).map((send) => send.link.conn);
      if (this.#spinFor(look, readers, timeoutMs) === undefined) {
        await waitUntil(
          look,
          this.#wakers,
          finishTopic(key),
          timeoutMs,
          () => new CommTimeoutError(timeoutText(where, timeoutMs, this.rank, finishProgress(produced))),
        );
      }
    } finally {
      this.#release(produced);
    }
    throwFailure(produced);
  }

  /**
   * Lets go of a value whose bytes were copied when it was set (small ones:
   * PeerConnection's COPY_MAX_BYTES) without waiting for its consumers: they
   * take it as usual, and their finishes find nobody. Not withdrawn: a
   * consumer that has not taken it yet still will.
   */
  srcRelease(key: string): boolean {
    const produced = this.#produced.get(key);
    if (!produced || produced.offer || produced.sends.some((send) => !copiedAtSend(send))) return false;
    this.#produced.delete(key);
    for (const send of produced.sends) this.#sends.delete(send.id);
    return true;
  }

  /** Forgets a value (also after a timeout, so the key can be set again). */
  #release(produced: Produced): void {
    this.#produced.delete(produced.key);
    for (const send of produced.sends) {
      this.#sends.delete(send.id);
      // A consumer that has not taken it drops it, rather than take it for the key's next value.
      if (!send.finished) send.link.conn.sendWithdraw(send.id);
    }
  }

  /**
   * What `look` finds before the wait sleeps: at once, or while this rank
   * spins reading the sockets of `peers` (those it waits for), when spinning
   * pays (SpinPolicy) and the wait may wait at all (a timeout of 0 looks
   * once). Undefined when it must sleep.
   */
  #spinFor<T>(
    look: () => T | undefined,
    peers: () => readonly PeerConnection[],
    timeoutMs: number,
  ): T | undefined {
    let found = look();
    if (found !== undefined || timeoutMs === 0 || !this.#spin.pays()) return found;
    const conns = peers().filter((conn) => conn.readsWaiting);
    if (conns.length === 0) return undefined;
    for (const { conn } of this.#links.values()) conn.flushDeferred();
    this.#spin.spin(
      () => {
        for (const conn of conns) if (conn.readWaiting()) found ??= look();
        return found !== undefined;
      },
      Math.min(SPIN_MS, timeoutMs),
    );
    return found;
  }

  async destGet(key: string, options: StoreWaitOptions = {}): Promise<Tensor> {
    return (await this.destGetEntry(key, options)).tensor;
  }

  async destGetEntry(key: string, options: StoreWaitOptions = {}): Promise<StoreEntry> {
    const where = () => `destGet(${JSON.stringify(key)})`;
    const { from } = options;
    if (from === undefined) {
      throw new TypeError(
        `${where()}: the network store needs options.from, the global rank of the producer`,
      );
    }
    const timeoutMs = checkWait(options, this.#timeoutMs, where);
    checkKey(key, where);
    const link = this.#link(from, where);
    const asked = `${from}/${key}`;
    if (options.pull && !link.inbox.has(key) && !this.#asked.has(asked)) {
      this.#asked.add(asked);
      link.conn.sendWant(key);
    }
    const look = () => {
      this.#assertOpen(where);
      const arrival = link.inbox.take(key);
      if (arrival || !link.conn.failure) return arrival;
      throw rankFailure(where, this.rank, link.conn.failure);
    };
    const arrival =
      this.#spinFor(look, () => [link.conn], timeoutMs) ??
      (await waitUntil(
        look,
        this.#wakers,
        getTopic(from, key),
        timeoutMs,
        () => new CommTimeoutError(timeoutText(where, timeoutMs, this.rank, arrivalProgress(link.conn, key))),
      ));
    this.#asked.delete(asked);
    if ('refusal' in arrival) throw new NetworkStoreBufferError(`${where()}: ${arrival.refusal}`);
    const { buffer } = arrival.tensor.data;
    const reusable =
      buffer instanceof ArrayBuffer &&
      buffer.byteLength >= REUSE_MIN_BYTES &&
      !this.#landed.has(arrival.tensor)
        ? buffer
        : undefined;
    this.#consuming.add(key, {
      link,
      id: arrival.id,
      reusable,
      small: arrival.tensor.nbytes <= COPY_MAX_BYTES,
    });
    return { tensor: arrival.tensor, tag: arrival.tag, producerRank: from };
  }

  async destFinishGet(key: string, options: StoreFinishOptions = {}): Promise<void> {
    const where = () => `destFinishGet(${JSON.stringify(key)})`;
    checkFinish(options, where);
    const held = this.#consuming.take(key);
    if (!held) throw noGetError(where, this.rank);
    // A producer whose connection ended hears nothing; one that gave up on the value ignores it.
    held.link.conn.sendFinished(held.id, options, held.small);
    if (held.reusable) this.#spare.give(held.reusable);
  }

  /** Closes every connection and the server and rejects pending waits. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#dialing?.abort();
    this.#server.close();
    for (const link of this.#links.values()) {
      link.conn.close();
      link.inbox.clear();
    }
    for (const socket of this.#accepted) socket.destroy();
    this.#consuming.clear();
    this.#spare.clear();
    this.#landing.clear();
    this.#wakers.wakeAll();
    this.#produced.clear();
    this.#sends.clear();
    this.#wants.clear();
    this.#asked.clear();
  }

  /** close(): `using store = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.dispose](): void {
    this.close();
  }

  #assertOpen(where: () => string): void {
    if (this.#closed) throw closedError(where, 'network', this.rank);
  }

  #assertConnected(where: () => string): void {
    this.#assertOpen(where);
    if (!this.#connected) {
      throw new InvalidStateError(
        `${where()}: rank ${this.rank} is not connected to its peers yet (await connect() first)`,
      );
    }
  }

  #link(rank: number, where: () => string): Link {
    this.#assertConnected(where);
    const link = this.#links.get(rank);
    if (link) return link;
    throw new RangeError(
      `${where()}: rank ${rank} is not a peer of rank ${this.rank}` +
        (rank === this.rank ? " (a rank's values for itself do not cross the network)" : ''),
    );
  }
}

/** The peer's failure, said by the wait it ends, keeping its class (a lost connection, a malformed frame). */
function rankFailure(where: () => string, rank: number, failure: RankFailedError): RankFailedError {
  const Kind = failure.constructor as typeof RankFailedError;
  return new Kind(`${where()} on rank ${rank}: ${failure.message}`, failure.failedRank);
}

function finishProgress(p: Produced): string {
  const waiting = p.sends.filter((send) => !send.finished);
  const who = waiting.map(
    (send) => `rank ${send.link.conn.rank} (${send.sent ? 'value sent' : 'value still being sent'})`,
  );
  return `${finishedText(p.sends.length - waiting.length, p.sends.length)}; waiting for ${who.join(', ')}`;
}

function arrivalProgress(conn: PeerConnection, key: string): string {
  const arriving = conn.arriving;
  if (arriving?.key === key) {
    return `a value of ${arriving.nbytes} bytes from rank ${conn.rank} is still arriving (${arriving.received} bytes so far)`;
  }
  const behind = arriving
    ? ` (rank ${conn.rank} is sending a value of key ${JSON.stringify(arriving.key)}: ${arriving.received} of ${arriving.nbytes} bytes so far)`
    : '';
  return `no value from rank ${conn.rank} has arrived under this key${behind}`;
}
