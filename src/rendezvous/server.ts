/**
 * The rendezvous server: a small key-value store over TCP for bootstrapping a
 * job (in the spirit of c10d's TCPStore), run by the launcher or rank 0.
 * Binds 127.0.0.1 unless told otherwise; anywhere else it insists on a shared
 * secret and authenticates every peer before reading its requests. A peer that
 * breaks the protocol loses its connection, never the server, and no peer can
 * make it hold more than its limits (server-limits.ts): frames are bounded
 * before they are buffered, what is stored is capped, and connections that
 * stop making progress are closed.
 */
import net from 'node:net';
import {
  checkSecret,
  newNonce,
  proof,
  proofMatches,
  rendezvousSecretFromEnv,
  requireSecretOffLoopback,
} from './auth.ts';
import { RendezvousAuthError, RendezvousError } from './errors.ts';
import { FrameBudget } from './frame-budget.ts';
import {
  FatalKind,
  FrameDecoder,
  FrameReader,
  FrameType,
  FrameWriter,
  fatalFrame,
  HANDSHAKE_FRAME_LIMIT,
  maxFrameBytes,
  OP_NAMES,
  PROTOCOL_MAGIC,
  PROTOCOL_VERSION,
} from './protocol.ts';
import { type ClientHello, maxRequestBytes, type Request, readClientHello, readRequest } from './request.ts';
import { type Reply, runRequest } from './run-request.ts';
import { resolveServerLimits, type ServerLimitOptions, type ServerLimits } from './server-limits.ts';
import { RendezvousTable } from './table.ts';

export interface RendezvousServerOptions extends ServerLimitOptions {
  /** Address to bind; default '127.0.0.1'. Any non-loopback address needs a secret. */
  host?: string;
  /** 0 (default) picks a free port; read it from `server.port`. */
  port?: number;
  /** Shared secret; default TENSORCOMM_RENDEZVOUS_SECRET. When set, every peer must prove it, even on loopback. */
  secret?: string;
  /** Told about every connection the server drops or refuses (bad frame, failed authentication, a limit); default console.warn. */
  onConnectionError?: (error: RendezvousError) => void;
}

/** Replies a peer has not read yet past which the server stops reading its requests. */
const WRITE_BACKLOG_BYTES = 1024 * 1024;

interface Connection {
  socket: net.Socket;
  /** The peer's address, as connections are counted per address. */
  address: string;
  decoder: FrameDecoder;
  stage: 'hello' | 'ready' | 'closed';
  serverNonce: Buffer;
  rank: number;
  /** The one deadline in force: the handshake's, a frame's, or the idle one. */
  timer: NodeJS.Timeout | undefined;
  /** When the first byte of the frame being received arrived. */
  frameStartedAt: number | undefined;
  /** Bytes of the frame budget held for the frame being received. */
  reserved: number;
  /** Why its socket is not being read: a frame waiting for the budget, or replies the peer has not read. */
  blocked: 'budget' | 'drain' | undefined;
  /** When it began to leave its replies unread. */
  drainSince: number;
  grant: () => void;
  /** Its get/wait/barrier calls still parked in the table. */
  parked: number;
}

export class RendezvousServer {
  private readonly table: RendezvousTable;
  private readonly budget: FrameBudget;
  private readonly connections = new Set<Connection>();
  private readonly perAddress = new Map<string, number>();
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: net.Server,
    readonly host: string,
    readonly port: number,
    private readonly secret: string | undefined,
    /** The limits in force, defaults filled in. */
    readonly limits: Readonly<ServerLimits>,
    private readonly onConnectionError: (error: RendezvousError) => void,
  ) {
    this.table = new RendezvousTable(limits.maxStoredBytes);
    this.budget = new FrameBudget(limits.maxBufferedBytes);
    server.on('connection', (socket) => this.accept(socket));
  }

  static async start(options: RendezvousServerOptions = {}): Promise<RendezvousServer> {
    const host = options.host ?? '127.0.0.1';
    const secret = checkSecret(options.secret ?? rendezvousSecretFromEnv());
    requireSecretOffLoopback(host, secret, 'pass { secret } or set TENSORCOMM_RENDEZVOUS_SECRET');
    const limits = resolveServerLimits(options);
    const onError =
      options.onConnectionError ??
      ((e: RendezvousError) => console.warn(`tensorcomm rendezvous: ${e.message}`));
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as net.AddressInfo).port;
    return new RendezvousServer(server, host, port, secret, limits, onError);
  }

  /** Whether peers must prove they hold the shared secret. */
  get requiresAuth(): boolean {
    return this.secret !== undefined;
  }

  /** What the store holds now, as counted against maxStoredBytes. */
  get storedBytes(): number {
    return this.table.heldBytes;
  }

  /** Bytes of the frame budget held by frames still arriving, as counted against maxBufferedBytes. */
  get bufferedBytes(): number {
    return this.budget.usedBytes;
  }

  /** Connections open now, in the handshake or after it. */
  get connectionCount(): number {
    return this.connections.size;
  }

  /** Stops listening and drops every connection; clients' pending calls reject saying the server closed. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.table.clear();
      for (const conn of this.connections)
        this.drop(conn, fatalFrame(FatalKind.closed, 'the server is shutting down'));
      this.server.close(() => resolve());
    });
    return this.closing;
  }

  /** close(): `await using server = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private get address(): string {
    return `${this.host}:${this.port}`;
  }

  private accept(socket: net.Socket): void {
    if (this.closing) return void socket.destroy();
    socket.setNoDelay(true);
    const address = socket.remoteAddress ?? 'an unknown address';
    if (!this.makeRoom(address)) {
      const message = `too many connections from ${address}: it holds ${this.perAddress.get(address)}, the limit (maxConnectionsPerAddress) is ${this.limits.maxConnectionsPerAddress}`;
      this.onConnectionError(new RendezvousError(`refused a connection to ${this.address}: ${message}`));
      socket.on('error', () => {});
      socket.end(fatalFrame(FatalKind.protocol, message));
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    this.perAddress.set(address, (this.perAddress.get(address) ?? 0) + 1);
    const conn: Connection = {
      socket,
      address,
      decoder: new FrameDecoder(HANDSHAKE_FRAME_LIMIT),
      stage: 'hello',
      serverNonce: newNonce(),
      rank: -1,
      timer: undefined,
      frameStartedAt: undefined,
      reserved: 0,
      blocked: undefined,
      drainSince: 0,
      grant: () => this.granted(conn),
      parked: 0,
    };
    this.connections.add(conn);
    conn.timer = setTimeout(
      () =>
        this.reject(
          conn,
          new RendezvousAuthError(`no handshake within ${this.limits.handshakeTimeoutMs} ms`),
        ),
      this.limits.handshakeTimeoutMs,
    );
    socket.on('data', (chunk: Buffer) => this.receive(conn, chunk));
    socket.on('error', () => {}); // 'close' follows; a reset peer is not the server's failure
    socket.on('close', () => this.forget(conn));
    socket.write(
      new FrameWriter(FrameType.serverHello)
        .u32(PROTOCOL_MAGIC)
        .u8(PROTOCOL_VERSION)
        .u8(this.requiresAuth ? 1 : 0)
        .raw(conn.serverNonce)
        .u32(this.limits.maxKeyBytes)
        .u32(this.limits.maxValueBytes)
        .finish(),
    );
  }

  /**
   * Whether one more connection from `address` fits its cap. At the cap, the
   * oldest of its connections still in the handshake makes way: a client
   * that handshakes in a round trip then cannot be locked out by a stranger
   * who opens connections and never finishes the handshake.
   */
  private makeRoom(address: string): boolean {
    if ((this.perAddress.get(address) ?? 0) < this.limits.maxConnectionsPerAddress) return true;
    for (const conn of this.connections) {
      if (conn.address !== address || conn.stage !== 'hello') continue;
      this.reject(
        conn,
        new RendezvousError(
          `it was still in the handshake when ${address} reached its limit of ${this.limits.maxConnectionsPerAddress} connections (maxConnectionsPerAddress); the oldest such makes way`,
        ),
      );
      return true;
    }
    return false;
  }

  private receive(conn: Connection, chunk: Buffer): void {
    if (conn.stage === 'closed') return;
    conn.decoder.push(chunk);
    conn.frameStartedAt ??= performance.now();
    this.pump(conn);
  }

  /** Handles every whole frame received, as far as the budget and the peer's unread replies allow. */
  private pump(conn: Connection): void {
    try {
      while (!isClosed(conn) && conn.blocked === undefined) {
        const length = conn.decoder.declared();
        if (length === undefined) break;
        if (conn.stage === 'ready' && conn.reserved < length && !this.admit(conn, length)) break;
        const body = conn.decoder.next();
        if (!body) break;
        this.budget.release(conn.reserved);
        conn.reserved = 0;
        conn.frameStartedAt = conn.decoder.pending > 0 ? performance.now() : undefined;
        this.handle(conn, body);
        if (!isClosed(conn) && conn.socket.writableLength > WRITE_BACKLOG_BYTES) this.awaitDrain(conn);
      }
    } catch (error) {
      const e = error instanceof RendezvousError ? error : new RendezvousError(String(error));
      this.reject(conn, e);
      return;
    }
    this.arm(conn);
  }

  /**
   * Checks a request's declared length against what its op may carry, then
   * reserves it from the budget; false while more bytes or the budget are
   * needed first.
   */
  private admit(conn: Connection, length: number): boolean {
    const head = conn.decoder.peek(2);
    if (!head) return false;
    if (head[0] !== FrameType.request)
      throw new RendezvousError(`unexpected frame type ${head[0]} during ready`);
    const max = maxRequestBytes(head[1], this.limits);
    if (length > max) {
      throw new RendezvousError(
        `a ${OP_NAMES[head[1]]} request of ${length} bytes exceeds the limit of ${max} (maxKeyBytes ${this.limits.maxKeyBytes}, maxValueBytes ${this.limits.maxValueBytes})`,
      );
    }
    if (this.budget.reserve(length, conn.grant)) {
      conn.reserved = length;
      return true;
    }
    conn.blocked = 'budget';
    conn.socket.pause();
    return false;
  }

  private granted(conn: Connection): void {
    conn.reserved = conn.decoder.declared() ?? 0;
    conn.blocked = undefined;
    conn.frameStartedAt = performance.now(); // its time to arrive starts now that it may
    conn.socket.resume();
    setImmediate(() => this.pump(conn));
  }

  private awaitDrain(conn: Connection): void {
    conn.blocked = 'drain';
    conn.drainSince = performance.now();
    conn.socket.pause();
    conn.socket.once('drain', () => {
      conn.blocked = undefined;
      conn.socket.resume();
      this.pump(conn);
    });
  }

  /** Sets the deadline of a connection's present state: a frame arriving, replies unread, or idleness. */
  private arm(conn: Connection): void {
    if (conn.stage !== 'ready') return;
    clearTimeout(conn.timer);
    conn.timer = undefined;
    const { frameTimeoutMs, idleTimeoutMs } = this.limits;
    if (conn.blocked === 'budget') return; // waiting on other connections is not its fault
    if (conn.blocked === 'drain') {
      conn.timer = setTimeout(
        () => this.reject(conn, new RendezvousError(`it read none of its replies for ${idleTimeoutMs} ms`)),
        Math.max(0, conn.drainSince + idleTimeoutMs - performance.now()),
      );
    } else if (conn.frameStartedAt !== undefined) {
      const left = conn.frameStartedAt + frameTimeoutMs - performance.now();
      conn.timer = setTimeout(
        () =>
          this.reject(
            conn,
            new RendezvousError(
              `a frame of ${conn.decoder.declared() ?? '?'} bytes did not arrive whole within ${frameTimeoutMs} ms (frameTimeoutMs); ${conn.decoder.pending} bytes came`,
            ),
          ),
        Math.max(0, left),
      );
    } else if (conn.parked === 0) {
      conn.timer = setTimeout(
        () =>
          this.reject(
            conn,
            new RendezvousError(`idle for ${idleTimeoutMs} ms (idleTimeoutMs) with no call pending`),
          ),
        idleTimeoutMs,
      );
    }
  }

  private handle(conn: Connection, body: Buffer): void {
    const frame = new FrameReader(body, this.limits);
    const type = frame.u8();
    if (conn.stage === 'hello' && type === FrameType.clientHello) this.greet(conn, readClientHello(frame));
    else if (conn.stage === 'ready' && type === FrameType.request) this.serve(conn, readRequest(frame));
    else throw new RendezvousError(`unexpected frame type ${type} during ${conn.stage}`);
  }

  private greet(conn: Connection, hello: ClientHello): void {
    conn.rank = hello.rank;
    const { nonce: clientNonce, proof: clientProof } = hello;
    let serverProof: Buffer = Buffer.alloc(0);
    if (this.secret !== undefined) {
      if (!proofMatches(proof(this.secret, 'client', conn.serverNonce, clientNonce), clientProof)) {
        throw new RendezvousAuthError(
          clientProof.byteLength === 0
            ? 'the client sent no authentication'
            : 'the client failed authentication',
        );
      }
      serverProof = proof(this.secret, 'server', conn.serverNonce, clientNonce);
    }
    clearTimeout(conn.timer);
    conn.stage = 'ready';
    conn.decoder.limit = maxFrameBytes(this.limits);
    conn.socket.write(
      new FrameWriter(FrameType.welcome)
        .u8(serverProof.byteLength)
        .raw(serverProof)
        .u32(this.limits.idleTimeoutMs)
        .finish(),
    );
  }

  /** Runs one request, its answers written as they come (a parked call's later). */
  private serve(conn: Connection, request: Request): void {
    const reply: Reply = (status, write) => {
      if (conn.stage === 'closed') return;
      const w = new FrameWriter(FrameType.response).u32(request.id).u8(status);
      write?.(w);
      conn.socket.cork();
      for (const piece of w.pieces()) conn.socket.write(piece);
      conn.socket.uncork();
    };
    runRequest(this.table, conn, request, reply, () => this.arm(conn));
  }

  /** Drops a peer that broke the protocol or failed authentication, telling it and the log why. */
  private reject(conn: Connection, error: RendezvousError): void {
    if (conn.stage === 'closed') return;
    const peer = `${conn.socket.remoteAddress}:${conn.socket.remotePort}${conn.rank >= 0 ? ` (rank ${conn.rank})` : ''}`;
    const logged = new (error.constructor as typeof RendezvousError)(
      `dropped the connection from ${peer} to ${this.address}: ${error.message}`,
    );
    this.onConnectionError(logged);
    this.drop(
      conn,
      fatalFrame(error instanceof RendezvousAuthError ? FatalKind.auth : FatalKind.protocol, error.message),
    );
  }

  private drop(conn: Connection, farewell: Buffer): void {
    if (conn.stage === 'closed') return;
    this.forget(conn);
    conn.socket.write(farewell, () => conn.socket.destroy());
    // A peer that never reads would keep the write pending; end it regardless.
    setTimeout(() => conn.socket.destroy(), 1000).unref();
  }

  private forget(conn: Connection): void {
    if (conn.stage === 'closed') return;
    conn.stage = 'closed';
    clearTimeout(conn.timer);
    this.connections.delete(conn);
    const left = (this.perAddress.get(conn.address) ?? 1) - 1;
    if (left > 0) this.perAddress.set(conn.address, left);
    else this.perAddress.delete(conn.address);
    this.budget.cancel(conn.grant);
    this.budget.release(conn.reserved);
    conn.reserved = 0;
    conn.decoder.takeBuffered(); // a dropped peer's partial frame is not kept until its socket is collected
    this.table.dropOwner(conn);
  }
}

/** A test the compiler does not narrow: handling a frame may close the connection. */
const isClosed = (conn: Connection) => conn.stage === 'closed';
