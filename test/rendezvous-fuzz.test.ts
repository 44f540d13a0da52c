/**
 * The rendezvous frame decoders under malformed input, by seeded fuzzing:
 * the stream decoder, the requests and hellos a server reads, the hello a
 * client reads. Whatever the bytes, the outcome is a RendezvousError or a
 * frame whose fields are within the limits; and a live server fed such
 * streams on many connections survives, stays within its limits and goes
 * on serving.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RendezvousClient, RendezvousError, RendezvousServer } from '../src/index.ts';
import { readServerHello } from '../src/rendezvous/handshake.ts';
import {
  FrameDecoder,
  FrameReader,
  FrameType,
  FrameWriter,
  HANDSHAKE_FRAME_LIMIT,
  type Limits,
  MAX_KEYS_PER_CALL,
  MAX_TIMEOUT_MS,
  maxFrameBytes,
  Op,
  PROTOCOL_MAGIC,
  PROTOCOL_VERSION,
} from '../src/rendezvous/protocol.ts';
import { readClientHello, readRequest } from '../src/rendezvous/request.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';
import { until } from './fixtures/rendezvous-peer.ts';

type Rnd = () => number;
const int = (rnd: Rnd, n: number) => Math.floor(rnd() * n);
const pick = <T>(rnd: Rnd, items: readonly T[]) => items[int(rnd, items.length)];

/** Small limits, so that "within the limits" is a strong check and oversized fields are easy to draw. */
const LIMITS: Limits = { maxKeyBytes: 64, maxValueBytes: 1024 };

const KEY_CHARS = ['a', 'z', '/', '0', 'é', '€', '😀'];
function key(rnd: Rnd): string {
  return Array.from({ length: 1 + int(rnd, 12) }, () => pick(rnd, KEY_CHARS)).join('');
}
function bytes(rnd: Rnd, max: number): Uint8Array {
  return Uint8Array.from({ length: int(rnd, max) }, () => int(rnd, 256));
}

/** A well-formed frame within LIMITS, of any type either end sends. */
function drawFrame(rnd: Rnd): Buffer {
  const kind = int(rnd, 12);
  if (kind === 0) {
    const proof = rnd() < 0.5 ? Buffer.alloc(0) : Buffer.alloc(32, 5);
    return new FrameWriter(FrameType.clientHello)
      .u32(PROTOCOL_MAGIC)
      .u8(PROTOCOL_VERSION)
      .i32(int(rnd, 8) - 1)
      .raw(Buffer.alloc(32, 3))
      .u8(proof.byteLength)
      .raw(proof)
      .finish();
  }
  if (kind === 1) {
    return new FrameWriter(FrameType.serverHello)
      .u32(PROTOCOL_MAGIC)
      .u8(PROTOCOL_VERSION)
      .u8(int(rnd, 2))
      .raw(Buffer.alloc(32, 9))
      .u32(1 + int(rnd, 65_535))
      .u32(1 + int(rnd, 2 ** 30))
      .finish();
  }
  const op = 1 + int(rnd, 9);
  const w = new FrameWriter(FrameType.request).u8(op).u32(int(rnd, 2 ** 32));
  const keys = () => Array.from({ length: 1 + int(rnd, 5) }, () => key(rnd));
  switch (op) {
    case Op.set:
      return w.key(key(rnd)).bytes(bytes(rnd, 1025)).finish();
    case Op.get:
      return w
        .key(key(rnd))
        .u32(1 + int(rnd, 2 ** 32 - 1))
        .finish();
    case Op.wait:
      return w
        .keys(keys())
        .u32(1 + int(rnd, 10_000))
        .finish();
    case Op.check:
      return w.keys(keys()).finish();
    case Op.add:
      return w
        .key(key(rnd))
        .f64(int(rnd, 100) - 50)
        .finish();
    case Op.compareSet:
      return w.key(key(rnd)).bytes(bytes(rnd, 600)).bytes(bytes(rnd, 600)).finish();
    case Op.delete:
      return w.key(key(rnd)).finish();
    case Op.barrier:
      return w
        .key(key(rnd))
        .u32(1 + int(rnd, 5))
        .u32(1 + int(rnd, 10_000))
        .finish();
    default:
      return w.finish();
  }
}

/** Truncations, bit flips, overwrites, insertions, forged length prefixes, splices and noise. */
function mutate(rnd: Rnd, frame: Buffer): Buffer {
  const out = Buffer.from(frame);
  switch (int(rnd, 7)) {
    case 0:
      return out.subarray(0, int(rnd, out.byteLength));
    case 1: {
      for (let i = 0, n = 1 + int(rnd, 4); i < n; i++) out[int(rnd, out.byteLength)] ^= 1 << int(rnd, 8);
      return out;
    }
    case 2: {
      for (let i = 0, n = 1 + int(rnd, 8); i < n; i++) out[int(rnd, out.byteLength)] = int(rnd, 256);
      return out;
    }
    case 3: {
      const at = int(rnd, out.byteLength);
      return Buffer.concat([out.subarray(0, at), Buffer.from(bytes(rnd, 16)), out.subarray(at)]);
    }
    case 4: {
      out.writeUInt32BE(
        pick(rnd, [0, 1, out.byteLength - 5, out.byteLength + 3, 2 ** 32 - 1, int(rnd, 2 ** 32)]) >>> 0,
      );
      return out;
    }
    case 5:
      return Buffer.concat([out.subarray(0, int(rnd, out.byteLength)), mutate(rnd, drawFrame(rnd))]);
    default:
      return Buffer.from(bytes(rnd, 64));
  }
}

/** What a body decodes to: a checked request or hello, or a RendezvousError; anything else fails the test. */
function decodeBody(body: Buffer): void {
  const frame = new FrameReader(body, LIMITS);
  const type = frame.u8();
  if (type === FrameType.clientHello) {
    const hello = readClientHello(frame);
    expect(hello.nonce.byteLength).toBe(32);
  } else if (type === FrameType.serverHello) {
    readServerHello(frame);
  } else if (type === FrameType.request) {
    const request = readRequest(frame);
    const keys = 'keys' in request ? request.keys : 'key' in request ? [request.key] : [];
    expect(keys.length).toBeLessThanOrEqual(MAX_KEYS_PER_CALL);
    for (const k of keys) expect(Buffer.byteLength(k)).toBeLessThanOrEqual(LIMITS.maxKeyBytes);
    const values =
      request.op === Op.set
        ? [request.value]
        : request.op === Op.compareSet
          ? [request.expected, request.desired]
          : [];
    for (const v of values) expect(v.byteLength).toBeLessThanOrEqual(LIMITS.maxValueBytes);
    if ('timeoutMs' in request) expect(request.timeoutMs).toBeGreaterThan(0);
    if ('timeoutMs' in request) expect(request.timeoutMs).toBeLessThanOrEqual(MAX_TIMEOUT_MS);
  } else {
    throw new RendezvousError(`unexpected frame type ${type}`);
  }
}

/** Feeds a stream in random pieces to a decoder with `limit`; counts frames decoded and whether it ended in an error. */
function decodeStream(rnd: Rnd, stream: Buffer, limit: number): 'ok' | 'error' {
  const decoder = new FrameDecoder(limit);
  try {
    for (let at = 0; at < stream.byteLength; ) {
      const piece = 1 + int(rnd, 300);
      decoder.push(stream.subarray(at, at + piece));
      at += piece;
      for (let body = decoder.next(); body; body = decoder.next()) {
        expect(body.byteLength).toBeLessThanOrEqual(limit);
        decodeBody(body);
      }
    }
    return 'ok';
  } catch (error) {
    if (!(error instanceof RendezvousError)) throw error;
    return 'error';
  }
}

describe('rendezvous frame decoders', () => {
  it('decode every well-formed frame, in any split', () => {
    const rnd = mulberry32(7);
    for (let i = 0; i < 2000; i++) {
      expect(decodeStream(rnd, drawFrame(rnd), maxFrameBytes(LIMITS))).toBe('ok');
    }
  });

  it('fuzz: 12,000 malformed streams give a RendezvousError or frames within the limits, never another error', () => {
    const rnd = mulberry32(2026);
    const outcomes = { ok: 0, error: 0 };
    for (let i = 0; i < 12_000; i++) {
      const stream = Buffer.concat(
        Array.from({ length: 1 + int(rnd, 3) }, () => mutate(rnd, drawFrame(rnd))),
      );
      const limit = rnd() < 0.3 ? HANDSHAKE_FRAME_LIMIT : maxFrameBytes(LIMITS);
      outcomes[decodeStream(rnd, stream, limit)]++;
    }
    // Both outcomes occur, so the fuzz reaches past the first check.
    expect(outcomes.ok).toBeGreaterThan(500);
    expect(outcomes.error).toBeGreaterThan(5000);
  });
});

describe('a rendezvous server fed malformed streams', () => {
  const sockets: net.Socket[] = [];
  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });

  it('survives 400 connections of fuzzed frames, stays within its limits, and goes on serving', async () => {
    const dropped: unknown[] = [];
    const server = await RendezvousServer.start({
      ...LIMITS,
      secret: undefined,
      maxStoredBytes: 64 * 1024,
      maxBufferedBytes: maxFrameBytes(LIMITS),
      idleTimeoutMs: 2000,
      frameTimeoutMs: 2000,
      onConnectionError: (e) => dropped.push(e),
    });
    try {
      const rnd = mulberry32(99);
      const hello = new FrameWriter(FrameType.clientHello)
        .u32(PROTOCOL_MAGIC)
        .u8(PROTOCOL_VERSION)
        .i32(1)
        .raw(Buffer.alloc(32))
        .u8(0)
        .finish();
      let peakStored = 0;
      for (let batch = 0; batch < 20; batch++) {
        await Promise.all(
          Array.from({ length: 20 }, async () => {
            const socket = net.connect({ host: server.host, port: server.port });
            sockets.push(socket);
            socket.on('error', () => {});
            socket.on('data', () => {});
            const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
            // Most streams get past the handshake first, so the request decoder is reached.
            const frames = Array.from({ length: 1 + int(rnd, 6) }, () =>
              rnd() < 0.5 ? drawFrame(rnd) : mutate(rnd, drawFrame(rnd)),
            );
            socket.end(Buffer.concat(rnd() < 0.8 ? [hello, ...frames] : frames));
            await closed;
          }),
        );
        peakStored = Math.max(peakStored, server.storedBytes);
      }
      for (const e of dropped) {
        expect(e).toBeInstanceOf(RendezvousError);
        expect((e as Error).message).not.toMatch(/RangeError|TypeError|ERR_/);
      }
      expect(dropped.length).toBeGreaterThan(100);
      expect(peakStored).toBeLessThanOrEqual(64 * 1024);
      await until(() => server.connectionCount === 0, 'every fuzzed connection closed');
      expect(server.bufferedBytes).toBe(0);
      const client = await RendezvousClient.connect({
        host: server.host,
        port: server.port,
        timeoutMs: 5000,
      });
      await client.set('after', 'fuzz');
      expect(Buffer.from(await client.get('after')).toString()).toBe('fuzz');
      client.close();
    } finally {
      await server.close();
    }
  }, 60_000);
});
