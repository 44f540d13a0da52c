/**
 * The rendezvous store's frames (src/rendezvous/protocol.ts): a byte stream
 * split by FrameDecoder, each body read as the server reads hellos and
 * requests and the client reads the server's hello and fatal frames.
 */
import { RendezvousError } from '../../../src/rendezvous/errors.ts';
import { readFatal, readServerHello } from '../../../src/rendezvous/handshake.ts';
import {
  FatalKind,
  FrameDecoder,
  FrameReader,
  FrameType,
  FrameWriter,
  fatalFrame,
  type Limits,
  MAX_KEY_BYTES_LIMIT,
  MAX_KEYS_PER_CALL,
  MAX_TIMEOUT_MS,
  MAX_VALUE_BYTES_LIMIT,
  maxFrameBytes,
  NONCE_BYTES,
  Op,
  PROTOCOL_MAGIC,
  PROTOCOL_VERSION,
} from '../../../src/rendezvous/protocol.ts';
import { readClientHello, readRequest } from '../../../src/rendezvous/request.ts';
import { FieldLayout } from '../fields.ts';
import type { Sample } from '../mutants.ts';
import { int, pick, type Rnd, randomBytes } from '../random.ts';
import type { DecoderTarget } from '../target.ts';

/** Small limits, so that a field at its limit and one past it are quick to build and to refuse. */
const LIMITS: Limits = { maxKeyBytes: 64, maxValueBytes: 1024 };
const FRAME_LIMIT = maxFrameBytes(LIMITS);
const KEYS = ['a', 'rank/3', 'ключ', '😀/store'];

/** A frame built field by field, with the layout of what was written. */
class TracedFrame {
  readonly writer: FrameWriter;
  readonly layout = new FieldLayout(false).u32('frame length', FRAME_LIMIT).u8('frame type');
  constructor(type: number) {
    this.writer = new FrameWriter(type);
  }

  u8(name: string, value: number): this {
    this.writer.u8(value);
    this.layout.u8(name);
    return this;
  }

  u32(name: string, value: number, limit?: number): this {
    this.writer.u32(value);
    this.layout.u32(name, limit);
    return this;
  }

  f64(name: string, value: number): this {
    this.writer.f64(value);
    this.layout.f64(name);
    return this;
  }

  raw(bytes: Uint8Array): this {
    this.writer.raw(bytes);
    this.layout.skip(bytes.length);
    return this;
  }

  key(name: string, key: string): this {
    this.writer.key(key);
    this.layout.u16(`${name} length`, LIMITS.maxKeyBytes).skip(Buffer.byteLength(key));
    return this;
  }

  keys(keys: readonly string[]): this {
    this.u32('key count', keys.length, MAX_KEYS_PER_CALL);
    for (const [i, k] of keys.entries()) this.key(`key ${i}`, k);
    return this;
  }

  value(name: string, bytes: Uint8Array): this {
    this.writer.bytes(bytes);
    this.layout.u32(`${name} length`, LIMITS.maxValueBytes).skip(bytes.length);
    return this;
  }

  sample(): Sample {
    return { bytes: this.writer.finish(), fields: this.layout.fields };
  }
}

function request(rnd: Rnd): Sample {
  const op = 1 + int(rnd, 9);
  const frame = new TracedFrame(FrameType.request).u8('op', op).u32('id', int(rnd, 2 ** 32));
  const timeout = () => frame.u32('timeout ms', 1 + int(rnd, 60_000), MAX_TIMEOUT_MS);
  const value = () => randomBytes(rnd, int(rnd, 64));
  switch (op) {
    case Op.set:
      return frame.key('key', pick(rnd, KEYS)).value('value', value()).sample();
    case Op.get:
      frame.key('key', pick(rnd, KEYS));
      return timeout().sample();
    case Op.wait:
      frame.keys(KEYS.slice(0, 1 + int(rnd, KEYS.length)));
      return timeout().sample();
    case Op.check:
      return frame.keys(KEYS.slice(0, 1 + int(rnd, KEYS.length))).sample();
    case Op.add:
      return frame
        .key('key', pick(rnd, KEYS))
        .f64('delta', int(rnd, 100) - 50)
        .sample();
    case Op.compareSet:
      return frame.key('key', pick(rnd, KEYS)).value('expected', value()).value('desired', value()).sample();
    case Op.delete:
      return frame.key('key', pick(rnd, KEYS)).sample();
    case Op.barrier:
      frame.key('name', pick(rnd, KEYS)).u32('world size', 1 + int(rnd, 64));
      return timeout().sample();
    default:
      return frame.sample();
  }
}

function hello(rnd: Rnd): Sample {
  if (rnd() < 0.5) {
    const proof = rnd() < 0.5 ? new Uint8Array(0) : randomBytes(rnd, 32);
    return new TracedFrame(FrameType.clientHello)
      .u32('magic', PROTOCOL_MAGIC)
      .u8('version', PROTOCOL_VERSION)
      .u32('rank', (int(rnd, 8) - 1) >>> 0)
      .raw(randomBytes(rnd, NONCE_BYTES))
      .u8('proof length', proof.length)
      .raw(proof)
      .sample();
  }
  return new TracedFrame(FrameType.serverHello)
    .u32('magic', PROTOCOL_MAGIC)
    .u8('version', PROTOCOL_VERSION)
    .u8('auth required', int(rnd, 2))
    .raw(randomBytes(rnd, NONCE_BYTES))
    .u32('max key bytes', LIMITS.maxKeyBytes, MAX_KEY_BYTES_LIMIT)
    .u32('max value bytes', LIMITS.maxValueBytes, MAX_VALUE_BYTES_LIMIT)
    .sample();
}

function fatal(rnd: Rnd): Sample {
  const text = pick(rnd, ['', 'bad secret', 'closing: «idle»']);
  const layout = new FieldLayout(false)
    .u32('frame length', FRAME_LIMIT)
    .u8('frame type')
    .u8('fatal kind')
    .u32('text length');
  return { bytes: fatalFrame(pick(rnd, Object.values(FatalKind)), text), fields: layout.fields };
}

/** A frame body read as the end that receives it reads it. */
function readBody(body: Buffer): unknown {
  const frame = new FrameReader(body, LIMITS);
  const type = frame.u8();
  if (type === FrameType.clientHello) return readClientHello(frame);
  if (type === FrameType.serverHello) return readServerHello(frame);
  if (type === FrameType.request) return readRequest(frame);
  if (type === FrameType.fatal) return readFatal(frame, 'the fuzz');
  throw new RendezvousError(`unexpected frame type ${type}`);
}

export const rendezvousFrame: DecoderTarget = {
  name: 'rendezvous frame',
  ownError: RendezvousError,
  sample(rnd) {
    const kind = rnd();
    return kind < 0.7 ? request(rnd) : kind < 0.9 ? hello(rnd) : fatal(rnd);
  },
  decode(bytes) {
    const decoder = new FrameDecoder(FRAME_LIMIT);
    decoder.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length));
    const frames: unknown[] = [];
    for (let body = decoder.next(); body; body = decoder.next()) frames.push(readBody(body));
    return frames;
  },
  reseal(bytes) {
    if (bytes.length < 4) return false;
    new DataView(bytes.buffer, bytes.byteOffset).setUint32(0, bytes.length - 4);
    return true;
  },
};
