/**
 * One authenticated connection to a peer rank, after the handshake: turns the
 * byte stream into values, finishes and withdrawals for the store, and writes
 * the store's. Frames and payloads are read in the order they were written,
 * so any number of values may be in flight. The first thing that goes wrong
 * (the peer hangs up, dies, says why it leaves, or sends a malformed frame)
 * ends the connection for good; `failure` then says what happened, for every
 * wait on this peer.
 */
import net from 'node:net';
import type { FrameDecoder } from '../rendezvous/protocol.ts';
import { RankFailedError } from '../runtime/errors.ts';
import { libc, MSG_DONTWAIT } from '../runtime/libc.ts';
import type { NetworkBytes } from '../runtime/network-stats.ts';
import type { StoreFinishOptions } from '../runtime/tensor-store.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { NetworkStoreProtocolError } from './errors.ts';
import { farewell, type PeerHello } from './handshake.ts';
import { socketFd, writeToSocket } from './socket-writes.ts';
import {
  decodeFrame,
  type Finished,
  finishedFrame,
  statusHeaderFrame,
  type ValueHeader,
  valueHeaderFrame,
  wantFrame,
  withdrawFrame,
} from './wire.ts';

/** What the store does with what arrives; none of these may throw. */
export interface PeerEvents {
  /** A value's header arrived: the tensor its payload goes into, or undefined to skip the payload. */
  valueStarts(peer: PeerConnection, header: ValueHeader): Tensor | undefined;
  /** All of the value's payload is in the tensor valueStarts gave. */
  valueArrived(peer: PeerConnection, header: ValueHeader, tensor: Tensor): void;
  finished(peer: PeerConnection, finished: Finished): void;
  withdrawn(peer: PeerConnection, id: number): void;
  /** The peer asks for a value this rank offered (or will). */
  wanted(peer: PeerConnection, key: string): void;
  /** The peer's status row (its debug monitor's, as JSON) arrived. */
  status(peer: PeerConnection, row: Uint8Array): void;
  /** The connection ended (not by close()); `peer.failure` says why. */
  lost(peer: PeerConnection): void;
}

/** Raw bytes that follow a header frame: a value's, or a status row's. */
interface Payload {
  /** The value's key, for timeout messages; undefined for a status row. */
  key: string | undefined;
  nbytes: number;
  /** Where the bytes go, or undefined while skipping a refused value. */
  into: Uint8Array | undefined;
  received: number;
  arrived(): void;
}

/** Payloads up to this size are copied behind their header and written with it. */
export const COPY_MAX_BYTES = 64 << 10;
/** Where frames are read into, between payloads: small, as what follows a header in the same read is copied. */
const STAGE_BYTES = 16 << 10;

/** The part of a net.Socket's TCP handle that taking it over needs (Node's own, not typed). */
interface SocketHandle {
  useUserBuffer?: unknown;
}

export class PeerConnection {
  readonly rank: number;
  /** The largest value the peer accepts. */
  readonly maxValueBytes: number;
  readonly address: string;
  readonly #localRank: number;
  readonly #localMaxValueBytes: number;
  #socket: net.Socket;
  readonly #decoder: FrameDecoder;
  /** Frames are read into this; payloads straight into their tensors (see #takeOver). */
  readonly #stage = Buffer.allocUnsafe(STAGE_BYTES);
  readonly #events: PeerEvents;
  #payload: Payload | undefined;
  /** Finishes of small values not written yet (sendFinished). */
  #deferred: Buffer[] = [];
  #flushing = false;
  /**
   * Where the event loop's next read of the socket goes, on a socket whose reads go into buffers of
   * this class's choosing (see #takeOver; undefined on any other): Node asks for it after each read, not before.
   */
  #eventLoopReadsInto: Uint8Array | undefined;
  #failure: RankFailedError | undefined;
  #socketError = '';
  /** What went each way since the handshake, frames whole (ctx.networkStats()); the store keeps it per peer. */
  readonly #traffic: NetworkBytes;

  constructor(
    socket: net.Socket,
    decoder: FrameDecoder,
    peer: PeerHello,
    local: PeerHello,
    address: string,
    events: PeerEvents,
    traffic: NetworkBytes,
  ) {
    this.rank = peer.rank;
    this.maxValueBytes = peer.maxValueBytes;
    this.address = address;
    this.#localRank = local.rank;
    this.#localMaxValueBytes = local.maxValueBytes;
    this.#socket = socket;
    this.#decoder = decoder;
    this.#events = events;
    this.#traffic = traffic;
    // What the peer sent right after its handshake, read with it.
    traffic.receivedBytes += decoder.pending;
  }

  /**
   * Starts reading: first what came with the handshake, then the socket. Apart
   * from the constructor so the store knows the connection before its first
   * value arrives.
   */
  start(): void {
    const handshaken = this.#socket;
    const socket = this.#takeOver() ?? handshaken;
    this.#socket = socket;
    socket.on('error', (error) => {
      this.#socketError = error.message;
    });
    const lost = () =>
      this.#end(
        new RankFailedError(
          `rank ${this.rank} lost its connection to rank ${this.#localRank} (${this.address}): ` +
            (this.#socketError || 'the connection closed'),
          this.rank,
        ),
      );
    socket.on('close', lost);
    if (socket === handshaken)
      socket.on('data', (chunk: Buffer) => {
        this.#traffic.receivedBytes += chunk.byteLength;
        this.#receive(chunk);
      });
    this.#receive(Buffer.alloc(0));
    // It may have closed between the handshake and now, before 'close' had a listener.
    if (socket.destroyed) lost();
    else socket.resume();
  }

  /**
   * Reads the connection from here on into buffers of its own choosing:
   * frames into the stage, a payload straight into its tensor, in reads as
   * large as the kernel has bytes (a socket's 'data' events would allocate
   * 64 KiB per read and copy each into place). Node offers that (`onread`)
   * only to sockets it creates with the option, so a new net.Socket takes
   * over the handshaken one's TCP handle; what the old one had buffered goes
   * to the decoder first. Undefined, leaving the socket as it is, where the
   * handle cannot be taken over (or has bytes still to write).
   */
  #takeOver(): net.Socket | undefined {
    const old = this.#socket;
    const internal = old as unknown as { _handle: SocketHandle | null };
    const handle = internal._handle;
    if (!handle || typeof handle.useUserBuffer !== 'function' || old.destroyed || old.writableLength > 0) {
      return undefined;
    }
    for (let chunk = old.read() as Buffer | null; chunk !== null; chunk = old.read() as Buffer | null) {
      this.#traffic.receivedBytes += chunk.byteLength;
      this.#decoder.push(chunk);
    }
    internal._handle = null;
    // Node's own options, untyped: a socket over an existing handle (as net.Server makes for each
    // connection) and reads into buffers the callback chooses.
    const options = {
      handle,
      readable: true,
      writable: true,
      onread: {
        buffer: () => (this.#eventLoopReadsInto = this.#nextRead()),
        // Never false, which would pause the socket: #read decides when reading stops.
        callback: (nread: number, buffer: Uint8Array) => {
          this.#read(nread, buffer);
          return true;
        },
      },
    };
    const socket = new net.Socket(options as net.SocketConstructorOpts);
    // The old socket never hears of the handle again; whoever tracks it learns it is done.
    old.destroy();
    return socket;
  }

  /** Where the next read goes: the rest of the payload being received, or the stage. */
  #nextRead(): Uint8Array {
    const p = this.#payload;
    if (p?.into && !this.#failure) return p.into.subarray(p.received);
    return this.#stage;
  }

  #read(nread: number, buffer: Uint8Array): void {
    if (nread > 0) this.#traffic.receivedBytes += nread;
    if (nread <= 0 || this.#failure) return;
    const p = this.#payload;
    if (buffer !== this.#stage && p?.into) {
      // Straight into the payload's tensor.
      p.received += nread;
      if (p.received === p.nbytes) {
        this.#payload = undefined;
        p.arrived();
      }
      return;
    }
    this.#receive(this.#stage.subarray(0, nread));
    // The stage is read into again: what the decoder keeps of it must be its own.
    const rest = this.#decoder.takeBuffered();
    if (rest.byteLength > 0) this.#decoder.push(Buffer.from(rest));
  }

  /**
   * Reads what the socket holds now, without waiting and without a turn of
   * the event loop, into the buffers the event loop's reads use: a rank that
   * spins on its peer's answer takes it at once (NetworkTensorStore's
   * `spin`). True when it read anything. Only while `readsWaiting`.
   */
  readWaiting(): boolean {
    const fd = socketFd(this.#socket);
    if (fd === undefined || !this.readsWaiting) return false;
    const into = this.#nextRead();
    // Nothing there (EAGAIN), the peer's end (0) or an error: the event loop's read sees and reports the last two.
    const n = Number(libc().recv(fd, into, into.byteLength, MSG_DONTWAIT));
    if (n <= 0) return false;
    this.#read(n, into);
    return true;
  }

  /**
   * Whether readWaiting can read now: on a connection whose reads this class
   * chooses the buffers of (see #takeOver), while the event loop's next read
   * goes to the stage. Not while it goes into a payload: Node chose that
   * place after the last read, and bytes read here would move the payload
   * on under it.
   */
  get readsWaiting(): boolean {
    return this.#eventLoopReadsInto === this.#stage && !this.#failure;
  }

  /** Why the connection ended, once it did. */
  get failure(): RankFailedError | undefined {
    return this.#failure;
  }

  /** The bytes reserved for the value whose payload is being received (0 when none, or one refused). */
  get reservedArriving(): number {
    const p = this.#payload;
    return p?.key !== undefined && p.into ? p.nbytes : 0;
  }

  /** The value whose payload is being received, and how much of it is here. */
  get arriving(): { key: string; received: number; nbytes: number } | undefined {
    const p = this.#payload;
    return p?.key === undefined ? undefined : { key: p.key, received: p.received, nbytes: p.nbytes };
  }

  /**
   * Writes a value: its header, then the tensor's own bytes (not copied; the
   * producer leaves the tensor alone until its consumers finished), or for a
   * small value both at once, which costs one syscall instead of a gather
   * write's two. `sent` runs once the bytes left for the network.
   */
  sendValue(id: number, key: string, tag: Uint8Array, tensor: Tensor, sent: () => void): void {
    if (this.#failure) return;
    const socket = this.#socket;
    const header = valueHeaderFrame(id, key, tag, tensor);
    const before = this.#takeDeferred();
    if (tensor.nbytes <= COPY_MAX_BYTES) {
      const parts = tensor.nbytes === 0 ? [header] : [header, tensor.bytes()];
      this.#put(before ? Buffer.concat([before, ...parts]) : Buffer.concat(parts), sent);
      return;
    }
    socket.cork();
    if (before) this.#put(before);
    this.#put(header);
    this.#put(tensor.bytes(), sent);
    socket.uncork();
  }

  /**
   * Tells the peer this rank finished its value. A small value's finish
   * (`defer`) waits for the end of this turn of the event loop, to go out in
   * one write with whatever this rank sends the peer next in the meantime
   * (in a loop of collectives, its next value): producers of small values
   * often do not wait for it (NetworkTensorStore.srcRelease), and a write
   * costs a system call and a wake-up on each side.
   */
  sendFinished(id: number, options: StoreFinishOptions, defer = false): void {
    if (this.#failure) return;
    const frame = finishedFrame(id, options);
    if (!defer) {
      this.#write(frame);
      return;
    }
    this.#deferred.push(frame);
    if (this.#flushing) return;
    this.#flushing = true;
    setImmediate(() => {
      this.#flushing = false;
      this.flushDeferred();
    });
  }

  /**
   * Writes the deferred finishes now: before this rank spins waiting for a
   * peer, which holds its event loop, so the turn's end that they wait for
   * would come only after the spin. A peer spinning for one of them the while
   * would spin out its whole time, on every call.
   */
  flushDeferred(): void {
    const frames = this.#takeDeferred();
    if (frames && !this.#failure) this.#put(frames);
  }

  sendStatus(row: Uint8Array): void {
    if (!this.#failure) this.#write(Buffer.concat([statusHeaderFrame(row.byteLength), row]));
  }

  sendWant(key: string): void {
    if (!this.#failure) this.#write(wantFrame(key));
  }

  sendWithdraw(id: number): void {
    if (!this.#failure) this.#write(withdrawFrame(id));
  }

  /** Writes `frame` after the deferred finishes, so frames keep the order they were sent in. */
  #write(frame: Buffer): void {
    const before = this.#takeDeferred();
    this.#put(before ? Buffer.concat([before, frame]) : frame);
  }

  /** Writes bytes to the peer, counted as sent (every write after the handshake goes through here). */
  #put(bytes: Uint8Array, written?: () => void): void {
    this.#traffic.sentBytes += bytes.byteLength;
    writeToSocket(this.#socket, bytes, written);
  }

  /** The deferred finishes as one buffer, forgotten here; undefined when there are none. */
  #takeDeferred(): Buffer | undefined {
    const frames = this.#deferred;
    if (frames.length === 0) return undefined;
    this.#deferred = [];
    return frames.length === 1 ? frames[0] : Buffer.concat(frames);
  }

  /**
   * Ends the connection from this side, with no event: at once when the store
   * closes (the peer sees the connection close), or after telling the peer
   * why when it was refused.
   */
  close(farewellMessage?: string): void {
    // Finishes still deferred go first: a producer may wait for them (a write to a socket with room is immediate).
    const deferred = this.#takeDeferred();
    if (deferred && !this.#failure) this.#put(deferred);
    this.#failure ??= new RankFailedError(
      `rank ${this.#localRank} closed its connection to rank ${this.rank}`,
      undefined,
    );
    if (farewellMessage === undefined) this.#socket.destroy();
    else farewell(this.#socket, farewellMessage);
  }

  #receive(chunk: Buffer): void {
    // Bytes that were in flight when the connection failed are nobody's.
    if (this.#failure) return;
    try {
      for (;;) {
        if (this.#payload) {
          chunk = this.#fill(this.#payload, chunk);
          if (this.#payload || chunk.byteLength === 0) return;
        }
        if (chunk.byteLength > 0) this.#decoder.push(chunk);
        chunk = this.#frames();
        if (!this.#payload) return;
      }
    } catch (error) {
      const message = `rank ${this.rank} sent a malformed frame: ${(error as Error).message}`;
      farewell(
        this.#socket,
        `rank ${this.#localRank} closed the connection: you sent a malformed frame: ${(error as Error).message}`,
      );
      this.#end(
        new NetworkStoreProtocolError(
          `${message}; rank ${this.#localRank} closed its connection to it`,
          this.rank,
        ),
      );
    }
  }

  /** Handles whole frames until a payload begins; returns the bytes after its header. */
  #frames(): Buffer {
    for (let body = this.#decoder.next(); body && !this.#failure; body = this.#decoder.next()) {
      // Sizes are checked in the decoder, so nothing below allocates more than this rank accepts.
      const frame = decodeFrame(body, this.#localMaxValueBytes);
      if (frame.type === 'value') {
        this.#startValue(frame.header);
        if (this.#payload) return this.#decoder.takeBuffered();
      } else if (frame.type === 'status') {
        const into = new Uint8Array(frame.nbytes);
        this.#payload = {
          key: undefined,
          nbytes: into.byteLength,
          into,
          received: 0,
          arrived: () => this.#events.status(this, into),
        };
        return this.#decoder.takeBuffered();
      } else if (frame.type === 'finished') this.#events.finished(this, frame.finished);
      else if (frame.type === 'withdraw') this.#events.withdrawn(this, frame.id);
      else if (frame.type === 'want') this.#events.wanted(this, frame.key);
      else {
        this.#socket.destroy();
        this.#end(
          new RankFailedError(
            `rank ${this.rank} closed its connection to rank ${this.#localRank}: ${frame.message}`,
            this.rank,
          ),
        );
      }
    }
    return Buffer.alloc(0);
  }

  #startValue(header: ValueHeader): void {
    const tensor = this.#events.valueStarts(this, header);
    if (header.nbytes === 0) {
      if (tensor) this.#events.valueArrived(this, header, tensor);
      return;
    }
    this.#payload = {
      key: header.key,
      nbytes: header.nbytes,
      into: tensor?.bytes(),
      received: 0,
      arrived: () => {
        if (tensor) this.#events.valueArrived(this, header, tensor);
      },
    };
  }

  /** Copies what `chunk` holds of the payload into place; returns the rest of the chunk. */
  #fill(p: Payload, chunk: Buffer): Buffer {
    const n = Math.min(p.nbytes - p.received, chunk.byteLength);
    p.into?.set(chunk.subarray(0, n), p.received);
    p.received += n;
    if (p.received === p.nbytes) {
      this.#payload = undefined;
      p.arrived();
    }
    return chunk.subarray(n);
  }

  #end(failure: RankFailedError): void {
    if (this.#failure) return;
    this.#failure = failure;
    this.#events.lost(this);
  }
}
