/**
 * A rank's connection to the rendezvous server. Every call carries a deadline
 * (the server parks get/wait/barrier and answers a timeout naming what is
 * still missing; a local timer covers a server that stops answering), and a
 * connection that goes away rejects every pending call instead of hanging.
 * The socket holds the event loop only while calls are pending.
 */
import net from 'node:net';
import { CommTimeoutError } from '../runtime/errors.ts';
import { checkSecret, rendezvousSecretFromEnv } from './auth.ts';
import { RendezvousError, RendezvousTimeoutError, RendezvousUnreachableError } from './errors.ts';
import { clientHandshake, readFatal, type ServerTerms } from './handshake.ts';
import {
  checkTimeoutMs,
  FrameDecoder,
  FrameReader,
  FrameType,
  FrameWriter,
  HANDSHAKE_FRAME_LIMIT,
  MAX_KEYS_PER_CALL,
  Op,
  type OpCode,
  Status,
  toBytes,
} from './protocol.ts';

export interface RendezvousClientOptions {
  host: string;
  port: number;
  /** Shared secret; default TENSORCOMM_RENDEZVOUS_SECRET. Required when the server asks for one. */
  secret?: string;
  /** Default deadline of connect and of every call; default 300 s (c10d's default). */
  timeoutMs?: number;
  /** This rank, named in errors and in the server's log. */
  rank?: number;
}

export interface RendezvousWaitOptions {
  timeoutMs?: number;
}

interface Pending {
  op: OpCode;
  what: string;
  timeoutMs: number;
  timer: NodeJS.Timeout;
  resolve(frame: FrameReader): void;
  reject(error: Error): void;
}

const DEFAULT_TIMEOUT_MS = 300_000;
/** A server answers a parked call's timeout itself; the local timer waits this much longer before giving up on it. */
const SERVER_ANSWER_GRACE_MS = 2000;
const MAX_RETRY_DELAY_MS = 500;

export class RendezvousClient {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closedBy: Error | undefined;
  private readonly keepAlive: NodeJS.Timeout | undefined;

  /** Takes over a socket that finished the handshake; `decoder` may already hold the first frames. */
  private constructor(
    private readonly socket: net.Socket,
    private readonly decoder: FrameDecoder,
    private readonly limits: ServerTerms,
    readonly host: string,
    readonly port: number,
    readonly rank: number | undefined,
    readonly timeoutMs: number,
  ) {
    socket.unref();
    socket.on('data', (chunk: Buffer) => {
      decoder.push(chunk);
      this.receive();
    });
    socket.on('error', (e) => this.shutDown(this.lost(e.message)));
    socket.on('close', () => this.shutDown(this.lost('the connection closed')));
    // The server closes a connection quiet for its idle timeout; a live client speaks up well before.
    // A ping that fails needs no word: a lost connection fails every call through shutDown above.
    if (limits.idleTimeoutMs > 0) {
      this.keepAlive = setInterval(
        () => void this.call(Op.ping, 'ping', this.timeoutMs, () => {}).catch(() => {}),
        Math.max(1, Math.floor(limits.idleTimeoutMs / 3)),
      );
      this.keepAlive.unref();
    }
    this.receive();
  }

  /** Connects, retrying until the deadline while the server is not up yet, then authenticates. */
  static async connect(options: RendezvousClientOptions): Promise<RendezvousClient> {
    const timeoutMs = checkTimeoutMs(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, 'RendezvousClient.connect');
    if (
      options.rank !== undefined &&
      (!Number.isInteger(options.rank) || options.rank < 0 || options.rank > 2 ** 31 - 1)
    ) {
      throw new RangeError(
        `RendezvousClient.connect: rank must be a non-negative integer, got ${options.rank}`,
      );
    }
    const secret = checkSecret(options.secret ?? rendezvousSecretFromEnv());
    const deadline = performance.now() + timeoutMs;
    const who = describeRank(options.rank);
    let lastError = '';
    for (let delay = 10; ; delay = Math.min(2 * delay, MAX_RETRY_DELAY_MS)) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new RendezvousUnreachableError(
          `${who} could not connect to the rendezvous server at ${options.host}:${options.port} within ${timeoutMs} ms (${lastError})`,
        );
      }
      let socket: net.Socket;
      try {
        socket = await openSocket(options.host, options.port, remaining);
      } catch (error) {
        if (!(error instanceof RetryableConnectError)) throw error;
        lastError = error.message;
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(delay, Math.max(0, deadline - performance.now()))),
        );
        continue;
      }
      socket.setNoDelay(true);
      const decoder = new FrameDecoder(HANDSHAKE_FRAME_LIMIT);
      const address = `${options.host}:${options.port}`;
      const limits = await clientHandshake(socket, decoder, {
        secret,
        rank: options.rank,
        deadline,
        who,
        address,
      });
      return new RendezvousClient(
        socket,
        decoder,
        limits,
        options.host,
        options.port,
        options.rank,
        timeoutMs,
      );
    }
  }

  async set(key: string, value: Uint8Array | string): Promise<void> {
    const bytes = this.checkValue(key, toBytes(value));
    await this.call(Op.set, `set('${key}')`, this.timeoutMs, (w) => w.key(this.checkKey(key)).bytes(bytes));
  }

  /** Waits until the key is set, then returns its value. */
  async get(key: string, options?: RendezvousWaitOptions): Promise<Uint8Array> {
    const timeoutMs = this.timeoutFor('get', options);
    const frame = await this.call(Op.get, `get('${key}')`, timeoutMs, (w) =>
      w.key(this.checkKey(key)).u32(timeoutMs),
    );
    return frame.value();
  }

  /** Waits until every key is set. */
  async wait(keys: string[], options?: RendezvousWaitOptions): Promise<void> {
    const timeoutMs = this.timeoutFor('wait', options);
    const list = this.checkKeys('wait', keys);
    await this.call(Op.wait, `wait(${quoted(keys)})`, timeoutMs, (w) => w.keys(list).u32(timeoutMs));
  }

  /** Whether every key is set, without waiting. */
  async check(keys: string[]): Promise<boolean> {
    const list = this.checkKeys('check', keys);
    const frame = await this.call(Op.check, `check(${quoted(keys)})`, this.timeoutMs, (w) => w.keys(list));
    return frame.u8() === 1;
  }

  /** Atomically adds `delta` to the counter at `key` (created at 0) and returns the new value; `get` reads it as decimal text. */
  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta))
      throw new RangeError(`add('${key}'): delta must be a safe integer, got ${delta}`);
    const frame = await this.call(Op.add, `add('${key}')`, this.timeoutMs, (w) =>
      w.key(this.checkKey(key)).f64(delta),
    );
    return frame.f64();
  }

  /**
   * Sets `desired` if the key holds `expected` (or is missing and `expected` is
   * empty), as c10d's compareSet; returns the value the key holds afterwards,
   * or `expected` when the key is missing and `expected` is not empty.
   */
  async compareSet(
    key: string,
    expected: Uint8Array | string,
    desired: Uint8Array | string,
  ): Promise<Uint8Array> {
    const e = this.checkValue(key, toBytes(expected));
    const d = this.checkValue(key, toBytes(desired));
    const frame = await this.call(Op.compareSet, `compareSet('${key}')`, this.timeoutMs, (w) =>
      w.key(this.checkKey(key)).bytes(e).bytes(d),
    );
    return frame.value();
  }

  /** Removes the key; true if it existed. Calls waiting for it keep waiting. */
  async delete(key: string): Promise<boolean> {
    const frame = await this.call(Op.delete, `delete('${key}')`, this.timeoutMs, (w) =>
      w.key(this.checkKey(key)),
    );
    return frame.u8() === 1;
  }

  /**
   * Returns once `worldSize` clients called barrier(name). Reusable by name:
   * the last arrival releases the round and the next call starts a new one.
   * Callers must agree on worldSize; a rank (or connection) may be in a round
   * once. A timed-out caller leaves the round, so it may call again.
   */
  async barrier(name: string, worldSize: number, options?: RendezvousWaitOptions): Promise<void> {
    if (!Number.isInteger(worldSize) || worldSize < 1 || worldSize > 2 ** 31 - 1) {
      throw new RangeError(`barrier('${name}'): worldSize must be a positive integer, got ${worldSize}`);
    }
    const timeoutMs = this.timeoutFor('barrier', options);
    await this.call(Op.barrier, `barrier('${name}') of ${worldSize}`, timeoutMs, (w) =>
      w.key(this.checkKey(name)).u32(worldSize).u32(timeoutMs),
    );
  }

  /** Closes the connection; pending calls reject. */
  close(): void {
    this.shutDown(new RendezvousError(`${this.who}: the rendezvous client was closed`));
    this.socket.destroy();
  }

  /** close(): `using client = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.dispose](): void {
    this.close();
  }

  private get who(): string {
    return describeRank(this.rank);
  }

  private get address(): string {
    return `${this.host}:${this.port}`;
  }

  private receive(): void {
    try {
      for (let body = this.decoder.next(); body; body = this.decoder.next()) {
        const frame = new FrameReader(body, this.limits);
        const type = frame.u8();
        if (type === FrameType.fatal) {
          this.shutDown(readFatal(frame, this.address));
          this.socket.destroy();
          return;
        }
        if (type !== FrameType.response) throw new RendezvousError(`unexpected frame type ${type}`);
        this.answer(frame);
      }
    } catch (error) {
      const message = (error as Error).message;
      this.shutDown(
        new RendezvousError(`bad frame from the rendezvous server at ${this.address}: ${message}`),
      );
      this.socket.destroy();
    }
  }

  private answer(frame: FrameReader): void {
    const id = frame.u32();
    const call = this.pending.get(id);
    if (!call) return; // its local timer already rejected it
    this.settle(id);
    const status = frame.u8();
    if (status === Status.ok) {
      call.resolve(frame);
    } else if (status === Status.timeout) {
      const arrived = frame.u32();
      const missing = frame.list();
      call.reject(new RendezvousTimeoutError(this.timeoutMessage(call, missing, arrived), missing));
    } else {
      call.reject(new RendezvousError(`${this.who}: ${call.what} failed: ${frame.text()}`));
    }
  }

  private timeoutMessage(call: Pending, missing: string[], arrived: number): string {
    const head = `${this.who} timed out after ${call.timeoutMs} ms`;
    if (call.op === Op.barrier) {
      const ranks = missing.length > 0 ? `; missing ranks ${missing.join(', ')}` : '';
      return `${head} in ${call.what} at ${this.address}: ${arrived} arrived${ranks}`;
    }
    return `${head} in ${call.what} at ${this.address} waiting for rendezvous key(s) ${quoted(missing)}`;
  }

  private call(
    op: OpCode,
    what: string,
    timeoutMs: number,
    write: (w: FrameWriter) => void,
  ): Promise<FrameReader> {
    if (this.closedBy) return Promise.reject(this.closedBy);
    const id = this.nextId++;
    const w = new FrameWriter(FrameType.request).u8(op).u32(id);
    write(w);
    const parks = op === Op.get || op === Op.wait || op === Op.barrier;
    return new Promise<FrameReader>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          this.settle(id);
          reject(
            new CommTimeoutError(
              `${this.who}: the rendezvous server at ${this.address} did not answer ${what} within ${timeoutMs} ms`,
            ),
          );
        },
        parks ? timeoutMs + SERVER_ANSWER_GRACE_MS : timeoutMs,
      );
      if (this.pending.size === 0) this.socket.ref();
      this.pending.set(id, { op, what, timeoutMs, timer, resolve, reject });
      this.socket.write(w.finish());
    });
  }

  private settle(id: number): void {
    const call = this.pending.get(id);
    if (!call) return;
    clearTimeout(call.timer);
    this.pending.delete(id);
    if (this.pending.size === 0) this.socket.unref();
  }

  private lost(reason: string): RendezvousError {
    return new RendezvousError(
      `the connection to the rendezvous server at ${this.address} was lost: ${reason}`,
    );
  }

  /** Rejects every pending call with `error`; later calls reject with it too. */
  private shutDown(error: Error): void {
    if (this.closedBy) return;
    this.closedBy = error;
    clearInterval(this.keepAlive);
    for (const [id, call] of this.pending) {
      this.settle(id);
      call.reject(
        new (error.constructor as typeof RendezvousError)(
          `${this.who}: ${call.what} failed: ${error.message}`,
        ),
      );
    }
  }

  private timeoutFor(what: string, options: RendezvousWaitOptions | undefined): number {
    return options?.timeoutMs === undefined ? this.timeoutMs : checkTimeoutMs(options.timeoutMs, what);
  }

  private checkKey(key: string): string {
    if (typeof key !== 'string') throw new TypeError(`rendezvous key must be a string, got ${typeof key}`);
    const bytes = Buffer.byteLength(key, 'utf8');
    if (bytes === 0 || bytes > this.limits.maxKeyBytes) {
      throw new RangeError(
        `rendezvous key must be 1 to ${this.limits.maxKeyBytes} UTF-8 bytes, got ${bytes}`,
      );
    }
    return key;
  }

  private checkKeys(what: string, keys: string[]): string[] {
    if (!Array.isArray(keys) || keys.length === 0 || keys.length > MAX_KEYS_PER_CALL) {
      throw new RangeError(`${what}: pass 1 to ${MAX_KEYS_PER_CALL} keys`);
    }
    return keys.map((k) => this.checkKey(k));
  }

  private checkValue(key: string, value: Uint8Array): Uint8Array {
    if (value.byteLength > this.limits.maxValueBytes) {
      throw new RangeError(
        `value for rendezvous key '${key}' is ${value.byteLength} bytes; the server accepts at most ${this.limits.maxValueBytes}`,
      );
    }
    return value;
  }
}

/** The server is not reachable (yet): worth another try before the deadline. */
class RetryableConnectError extends Error {}

function openSocket(host: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new RetryableConnectError('connect timed out'));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      socket.destroy();
      reject(new RetryableConnectError(e.code ?? e.message));
    });
  });
}

function describeRank(rank: number | undefined): string {
  return rank === undefined ? 'a rendezvous client' : `rank ${rank}`;
}

function quoted(keys: readonly string[]): string {
  return keys.map((k) => `'${k}'`).join(', ');
}
