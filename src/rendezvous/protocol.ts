/**
 * Wire format of the rendezvous store: length-prefixed binary frames
 * (`u32 body length`, then `u8 frame type` and fields). Every length is checked
 * against a limit before anything is allocated, and a frame is parsed field by
 * field with bounds checks, so a hostile or broken peer can cause an error on
 * its own connection but never an unbounded allocation or code execution.
 */
import { RendezvousError } from './errors.ts';

export const PROTOCOL_MAGIC = 0x54435256; // 'TCRV'
/** 2: the welcome announces the idle timeout, and ping (op 9) keeps a quiet connection open. */
export const PROTOCOL_VERSION = 2;
export const NONCE_BYTES = 32;
export const DEFAULT_MAX_KEY_BYTES = 4096;
export const DEFAULT_MAX_VALUE_BYTES = 64 * 1024 * 1024;
/** Keys one wait/check may name; bounds the frame of a key list. */
export const MAX_KEYS_PER_CALL = 1024;
/** Until a peer is authenticated only the small handshake (and fatal) frames are accepted. */
export const HANDSHAKE_FRAME_LIMIT = 2048;
export const MAX_KEY_BYTES_LIMIT = 0xffff;
export const MAX_VALUE_BYTES_LIMIT = 1024 * 1024 * 1024;
/** setTimeout's ceiling; larger timeouts would fire at once. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export const FrameType = {
  serverHello: 1,
  clientHello: 2,
  welcome: 3,
  request: 4,
  response: 5,
  /** The connection is being closed for the reason in the frame. */
  fatal: 6,
} as const;

export const Op = {
  set: 1,
  get: 2,
  wait: 3,
  check: 4,
  add: 5,
  compareSet: 6,
  delete: 7,
  barrier: 8,
  /** Does nothing but show the connection is alive (the server closes idle ones). */
  ping: 9,
} as const;
export type OpCode = (typeof Op)[keyof typeof Op];
export const OP_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(Op).map(([k, v]) => [v, k]),
);

export const Status = { ok: 0, timeout: 1, error: 2 } as const;

export interface Limits {
  maxKeyBytes: number;
  maxValueBytes: number;
}

/** The largest frame a peer with these limits may send: compareSet carries two values. */
export function maxFrameBytes(limits: Limits): number {
  const keyList = 4 + MAX_KEYS_PER_CALL * (2 + limits.maxKeyBytes);
  return 64 + Math.max(2 + limits.maxKeyBytes + 8 + 2 * limits.maxValueBytes, keyList);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function toBytes(value: Uint8Array | string): Uint8Array {
  return typeof value === 'string' ? encoder.encode(value) : value;
}

const SHARED_PIECE_BYTES = 64 * 1024;

/** Builds one frame; fields are appended in order and the length prefix is filled in by `finish`. */
export class FrameWriter {
  private readonly parts: Uint8Array[] = [];
  private size = 0;

  constructor(type: number) {
    this.u8(type);
  }

  u8(value: number): this {
    return this.push(Uint8Array.of(value));
  }

  u32(value: number): this {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(value);
    return this.push(b);
  }

  i32(value: number): this {
    const b = Buffer.allocUnsafe(4);
    b.writeInt32BE(value);
    return this.push(b);
  }

  f64(value: number): this {
    const b = Buffer.allocUnsafe(8);
    b.writeDoubleBE(value);
    return this.push(b);
  }

  raw(bytes: Uint8Array): this {
    return this.push(bytes);
  }

  /** A u32-length-prefixed byte string. */
  bytes(bytes: Uint8Array): this {
    return this.u32(bytes.byteLength).push(bytes);
  }

  /** A u16-length-prefixed UTF-8 string. */
  key(key: string): this {
    const b = encoder.encode(key);
    const len = Buffer.allocUnsafe(2);
    len.writeUInt16BE(b.byteLength);
    return this.push(len).push(b);
  }

  /** Text for a human (an error message), u32-length-prefixed UTF-8. */
  text(message: string): this {
    return this.bytes(encoder.encode(message));
  }

  keys(keys: readonly string[]): this {
    this.u32(keys.length);
    for (const k of keys) this.key(k);
    return this;
  }

  finish(): Buffer {
    const out = Buffer.allocUnsafe(4 + this.size);
    out.writeUInt32BE(this.size);
    let at = 4;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.byteLength;
    }
    return out;
  }

  /**
   * The frame as pieces to write in order: small fields joined, byte strings
   * of SHARED_PIECE_BYTES or more left as the caller's memory, so that the
   * replies of one stored value to many waiters do not each copy it.
   */
  pieces(): Uint8Array[] {
    const out: Uint8Array[] = [];
    let small: Uint8Array[] = [Buffer.from(Uint32Array.of(0).buffer)];
    new DataView(small[0].buffer).setUint32(0, this.size);
    for (const p of this.parts) {
      if (p.byteLength < SHARED_PIECE_BYTES) {
        small.push(p);
        continue;
      }
      out.push(Buffer.concat(small), p);
      small = [];
    }
    if (small.length > 0) out.push(Buffer.concat(small));
    return out;
  }

  private push(bytes: Uint8Array): this {
    this.parts.push(bytes);
    this.size += bytes.byteLength;
    return this;
  }
}

/** Reads the fields of one frame body; any read past the end or over a limit is a RendezvousError. */
export class FrameReader {
  private at = 0;

  constructor(
    private readonly body: Buffer,
    private readonly limits: Limits,
  ) {}

  u8(): number {
    return this.take(1).readUInt8();
  }

  u32(): number {
    return this.take(4).readUInt32BE();
  }

  i32(): number {
    return this.take(4).readInt32BE();
  }

  f64(): number {
    return this.take(8).readDoubleBE();
  }

  raw(length: number): Buffer {
    return this.take(length);
  }

  /** A value: copied out, so the store does not pin the whole frame's buffer. */
  value(): Uint8Array {
    const length = this.u32();
    if (length > this.limits.maxValueBytes) {
      throw new RendezvousError(`value of ${length} bytes exceeds the limit of ${this.limits.maxValueBytes}`);
    }
    return new Uint8Array(this.take(length));
  }

  key(): string {
    const length = this.take(2).readUInt16BE();
    if (length === 0) throw new RendezvousError('empty key');
    if (length > this.limits.maxKeyBytes) {
      throw new RendezvousError(`key of ${length} bytes exceeds the limit of ${this.limits.maxKeyBytes}`);
    }
    try {
      return decoder.decode(this.take(length));
    } catch {
      throw new RendezvousError('key is not valid UTF-8');
    }
  }

  /** A non-empty key list, as a request names it. */
  keys(): string[] {
    const keys = this.list();
    if (keys.length === 0) throw new RendezvousError('empty key list');
    return keys;
  }

  list(): string[] {
    const count = this.u32();
    if (count > MAX_KEYS_PER_CALL) {
      throw new RendezvousError(`key list of ${count} keys exceeds the limit of ${MAX_KEYS_PER_CALL}`);
    }
    return Array.from({ length: count }, () => this.key());
  }

  /** Text the peer sent for a human (an error message): bounded, and never fatal to decode. */
  text(): string {
    return this.take(this.u32()).toString('utf8');
  }

  end(): void {
    if (this.at !== this.body.byteLength) {
      throw new RendezvousError(`${this.body.byteLength - this.at} unexpected trailing bytes in frame`);
    }
  }

  private take(length: number): Buffer {
    if (this.at + length > this.body.byteLength) {
      throw new RendezvousError(
        `truncated frame: a field of ${length} bytes at byte ${this.at} runs past its ${this.body.byteLength} bytes`,
      );
    }
    const out = this.body.subarray(this.at, this.at + length);
    this.at += length;
    return out;
  }
}

/**
 * Splits a byte stream into frame bodies, one at a time so a limit raised
 * after a frame (the handshake) applies to the very next one. Chunks are kept
 * as a list and joined once a whole frame is there; a declared length over
 * `limit` throws before any of it is buffered.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(public limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
  }

  /** Bytes received and not yet handed out as frames. */
  get pending(): number {
    return this.buffered;
  }

  /**
   * The declared body length of the frame being received (checked against
   * the limit), or undefined before its length prefix is complete.
   */
  declared(): number | undefined {
    if (this.buffered < 4) return undefined;
    const head = this.chunks[0].byteLength >= 4 ? this.chunks[0] : this.join();
    const length = head.readUInt32BE(0);
    if (length === 0) throw new RendezvousError('empty frame');
    if (length > this.limit)
      throw new RendezvousError(`frame of ${length} bytes exceeds the limit of ${this.limit}`);
    return length;
  }

  /** The first `n` bytes of the body being received, once that many are here; for checks before the rest arrives. */
  peek(n: number): Buffer | undefined {
    if (this.declared() === undefined || this.buffered < 4 + n) return undefined;
    const head = this.chunks[0].byteLength >= 4 + n ? this.chunks[0] : this.join();
    return head.subarray(4, 4 + n);
  }

  /** The next whole frame body, or undefined until more bytes arrive. */
  next(): Buffer | undefined {
    const length = this.declared();
    if (length === undefined || this.buffered < 4 + length) return undefined;
    const all = this.join();
    const rest = all.subarray(4 + length);
    this.chunks = rest.byteLength > 0 ? [rest] : [];
    this.buffered = rest.byteLength;
    return all.subarray(4, 4 + length);
  }

  /**
   * Hands over the bytes received after the last frame and forgets them, for a
   * stream that goes on outside the framing (a raw payload after its header).
   */
  takeBuffered(): Buffer {
    const rest = this.chunks.length > 0 ? this.join() : Buffer.alloc(0);
    this.chunks = [];
    this.buffered = 0;
    return rest;
  }

  private join(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.buffered)];
    return this.chunks[0];
  }
}

/** Why a connection is being closed, so the peer can raise the matching error. */
export const FatalKind = { protocol: 0, auth: 1, closed: 2 } as const;

export function fatalFrame(kind: number, message: string): Buffer {
  return new FrameWriter(FrameType.fatal).u8(kind).text(message.slice(0, 500)).finish();
}

export function checkTimeoutMs(timeoutMs: number, what: string): number {
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0 || timeoutMs > MAX_TIMEOUT_MS) {
    throw new RangeError(
      `${what}: timeoutMs must be a positive number of milliseconds up to ${MAX_TIMEOUT_MS}, got ${timeoutMs}`,
    );
  }
  return Math.ceil(timeoutMs);
}
