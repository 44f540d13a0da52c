/**
 * The rendezvous server: a small key-value store over TCP for bootstrapping a
 * job (in the spirit of c10d's TCPStore), run by the launcher or rank 0.
 * Binds 127.0.0.1 unless told otherwise; anywhere else it insists on a shared
 * secret and authenticates every peer before reading its requests. A peer that
 * breaks the protocol loses its connection, never the server.
 */
import net from 'node:net';
import {
  checkSecret,
  isLoopbackHost,
  newNonce,
  proof,
  proofMatches,
  rendezvousSecretFromEnv,
} from './auth.ts';
import { RendezvousAuthError, RendezvousError } from './errors.ts';
import {
  DEFAULT_MAX_KEY_BYTES,
  DEFAULT_MAX_VALUE_BYTES,
  FatalKind,
  FrameDecoder,
  FrameReader,
  FrameType,
  FrameWriter,
  fatalFrame,
  HANDSHAKE_FRAME_LIMIT,
  type Limits,
  MAX_KEY_BYTES_LIMIT,
  MAX_TIMEOUT_MS,
  MAX_VALUE_BYTES_LIMIT,
  maxFrameBytes,
  NONCE_BYTES,
  Op,
  PROTOCOL_MAGIC,
  PROTOCOL_VERSION,
  Status,
} from './protocol.ts';
import { type Parked, RendezvousTable } from './table.ts';

export interface RendezvousServerOptions {
  /** Address to bind; default '127.0.0.1'. Any non-loopback address needs a secret. */
  host?: string;
  /** 0 (default) picks a free port; read it from `server.port`. */
  port?: number;
  /** Shared secret; default TENSORCOMM_RENDEZVOUS_SECRET. When set, every peer must prove it, even on loopback. */
  secret?: string;
  /** Largest value a client may set; default 64 MiB. */
  maxValueBytes?: number;
  /** Longest key in UTF-8 bytes; default 4096. */
  maxKeyBytes?: number;
  /** A peer must finish the handshake within this time; default 10 s. */
  handshakeTimeoutMs?: number;
  /** Told about every connection the server drops (bad frame, failed authentication); default console.warn. */
  onConnectionError?: (error: RendezvousError) => void;
}

interface Connection {
  socket: net.Socket;
  decoder: FrameDecoder;
  stage: 'hello' | 'ready' | 'closed';
  serverNonce: Buffer;
  rank: number;
  handshakeTimer: NodeJS.Timeout | undefined;
}

export class RendezvousServer {
  private readonly table = new RendezvousTable();
  private readonly connections = new Set<Connection>();
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: net.Server,
    readonly host: string,
    readonly port: number,
    private readonly secret: string | undefined,
    private readonly limits: Limits,
    private readonly handshakeTimeoutMs: number,
    private readonly onConnectionError: (error: RendezvousError) => void,
  ) {
    server.on('connection', (socket) => this.accept(socket));
  }

  static async start(options: RendezvousServerOptions = {}): Promise<RendezvousServer> {
    const host = options.host ?? '127.0.0.1';
    const secret = checkSecret(options.secret ?? rendezvousSecretFromEnv());
    if (!isLoopbackHost(host) && secret === undefined) {
      throw new RendezvousAuthError(
        `the rendezvous server binds ${host}, which is not loopback, so it needs a shared secret: pass { secret } or set TENSORCOMM_RENDEZVOUS_SECRET`,
      );
    }
    const limits = {
      maxKeyBytes: checkLimit(
        'maxKeyBytes',
        options.maxKeyBytes ?? DEFAULT_MAX_KEY_BYTES,
        MAX_KEY_BYTES_LIMIT,
      ),
      maxValueBytes: checkLimit(
        'maxValueBytes',
        options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES,
        MAX_VALUE_BYTES_LIMIT,
      ),
    };
    const handshakeTimeoutMs = checkLimit(
      'handshakeTimeoutMs',
      options.handshakeTimeoutMs ?? 10_000,
      MAX_TIMEOUT_MS,
    );
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
    return new RendezvousServer(server, host, port, secret, limits, handshakeTimeoutMs, onError);
  }

  /** Whether peers must prove they hold the shared secret. */
  get requiresAuth(): boolean {
    return this.secret !== undefined;
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

  private get address(): string {
    return `${this.host}:${this.port}`;
  }

  private accept(socket: net.Socket): void {
    socket.setNoDelay(true);
    const conn: Connection = {
      socket,
      decoder: new FrameDecoder(HANDSHAKE_FRAME_LIMIT),
      stage: 'hello',
      serverNonce: newNonce(),
      rank: -1,
      handshakeTimer: undefined,
    };
    if (this.closing) return void socket.destroy();
    this.connections.add(conn);
    conn.handshakeTimer = setTimeout(
      () => this.reject(conn, new RendezvousAuthError(`no handshake within ${this.handshakeTimeoutMs} ms`)),
      this.handshakeTimeoutMs,
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

  private receive(conn: Connection, chunk: Buffer): void {
    if (conn.stage === 'closed') return;
    try {
      conn.decoder.push(chunk);
      for (let body = conn.decoder.next(); body; body = conn.decoder.next()) {
        if (isClosed(conn)) return; // an earlier frame of this chunk got the peer dropped
        const frame = new FrameReader(body, this.limits);
        const type = frame.u8();
        if (conn.stage === 'hello' && type === FrameType.clientHello) this.greet(conn, frame);
        else if (conn.stage === 'ready' && type === FrameType.request) this.serve(conn, frame);
        else throw new RendezvousError(`unexpected frame type ${type} during ${conn.stage}`);
      }
    } catch (error) {
      const e = error instanceof RendezvousError ? error : new RendezvousError(String(error));
      this.reject(conn, e);
    }
  }

  private greet(conn: Connection, frame: FrameReader): void {
    if (frame.u32() !== PROTOCOL_MAGIC) throw new RendezvousError('not a tensorcomm rendezvous client');
    const version = frame.u8();
    if (version !== PROTOCOL_VERSION) {
      throw new RendezvousError(`client speaks protocol version ${version}, this server ${PROTOCOL_VERSION}`);
    }
    conn.rank = frame.i32();
    const clientNonce = frame.raw(NONCE_BYTES);
    const clientProof = frame.raw(frame.u8());
    frame.end();
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
    clearTimeout(conn.handshakeTimer);
    conn.stage = 'ready';
    conn.decoder.limit = maxFrameBytes(this.limits);
    conn.socket.write(
      new FrameWriter(FrameType.welcome).u8(serverProof.byteLength).raw(serverProof).finish(),
    );
  }

  private serve(conn: Connection, frame: FrameReader): void {
    const op = frame.u8();
    const id = frame.u32();
    const reply = (status: number, write?: (w: FrameWriter) => void) => {
      if (conn.stage === 'closed') return;
      const w = new FrameWriter(FrameType.response).u32(id).u8(status);
      write?.(w);
      conn.socket.write(w.finish());
    };
    const parked: Parked = {
      ready: () => reply(Status.ok),
      timedOut: (missing, arrived) => reply(Status.timeout, (w) => w.u32(arrived).keys(missing)),
      failed: (message) => reply(Status.error, (w) => w.text(message)),
    };
    switch (op) {
      case Op.set: {
        const key = frame.key();
        const value = frame.value();
        frame.end();
        this.table.set(key, value);
        reply(Status.ok);
        break;
      }
      case Op.get: {
        const key = frame.key();
        const table = this.table;
        table.wait(conn, [key], readTimeout(frame), {
          ...parked,
          ready: () => reply(Status.ok, (w) => w.bytes(table.get(key) ?? new Uint8Array())),
        });
        break;
      }
      case Op.wait: {
        const keys = frame.keys();
        this.table.wait(conn, keys, readTimeout(frame), parked);
        break;
      }
      case Op.check: {
        const keys = frame.keys();
        frame.end();
        reply(Status.ok, (w) => w.u8(keys.every((k) => this.table.has(k)) ? 1 : 0));
        break;
      }
      case Op.add: {
        const key = frame.key();
        const delta = frame.f64();
        frame.end();
        let sum: number;
        try {
          if (!Number.isSafeInteger(delta))
            throw new RendezvousError(`add('${key}'): delta ${delta} is not a safe integer`);
          sum = this.table.add(key, delta);
        } catch (e) {
          parked.failed((e as Error).message);
          break;
        }
        reply(Status.ok, (w) => w.f64(sum));
        break;
      }
      case Op.compareSet: {
        const key = frame.key();
        const expected = frame.value();
        const desired = frame.value();
        frame.end();
        const now = this.table.compareSet(key, expected, desired);
        reply(Status.ok, (w) => w.bytes(now));
        break;
      }
      case Op.delete: {
        const key = frame.key();
        frame.end();
        const existed = this.table.delete(key);
        reply(Status.ok, (w) => w.u8(existed ? 1 : 0));
        break;
      }
      case Op.barrier: {
        const name = frame.key();
        const worldSize = frame.u32();
        const timeoutMs = readTimeout(frame);
        if (worldSize === 0) throw new RendezvousError(`barrier '${name}' with worldSize 0`);
        this.table.barrier(conn, name, worldSize, conn.rank, timeoutMs, parked);
        break;
      }
      default:
        throw new RendezvousError(`unknown operation ${op}`);
    }
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
    clearTimeout(conn.handshakeTimer);
    this.connections.delete(conn);
    this.table.dropOwner(conn);
  }
}

const isClosed = (conn: Connection) => conn.stage === 'closed';

function readTimeout(frame: FrameReader): number {
  const timeoutMs = frame.u32();
  frame.end();
  if (timeoutMs === 0) throw new RendezvousError('a wait with a timeout of 0 ms');
  return Math.min(timeoutMs, MAX_TIMEOUT_MS);
}

function checkLimit(name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new RangeError(`RendezvousServer.start: ${name} must be an integer from 1 to ${max}, got ${value}`);
  }
  return value;
}
