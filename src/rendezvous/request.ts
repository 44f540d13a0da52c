/**
 * A client's request, decoded apart from its execution: every field is read
 * and checked here, so a malformed request is a RendezvousError before the
 * server touches its table, and what the table refuses (a full store) can be
 * answered as an error while the connection stays open.
 */
import { RendezvousError } from './errors.ts';
import {
  type FrameReader,
  type Limits,
  MAX_KEYS_PER_CALL,
  MAX_TIMEOUT_MS,
  NONCE_BYTES,
  Op,
  PROTOCOL_MAGIC,
  PROTOCOL_VERSION,
} from './protocol.ts';

export interface ClientHello {
  /** -1: a client without a rank. */
  rank: number;
  nonce: Buffer;
  /** Empty when the client sent none. */
  proof: Buffer;
}

/** Reads the rest of a client hello (after its type byte). */
export function readClientHello(frame: FrameReader): ClientHello {
  if (frame.u32() !== PROTOCOL_MAGIC) throw new RendezvousError('not a tensorcomm rendezvous client');
  const version = frame.u8();
  if (version !== PROTOCOL_VERSION) {
    throw new RendezvousError(`client speaks protocol version ${version}, this server ${PROTOCOL_VERSION}`);
  }
  const rank = frame.i32();
  const nonce = frame.raw(NONCE_BYTES);
  const proof = frame.raw(frame.u8());
  frame.end();
  return { rank, nonce, proof };
}

export type Request = { id: number } & RequestFields;

type RequestFields =
  | { op: typeof Op.set; key: string; value: Uint8Array }
  | { op: typeof Op.get; key: string; timeoutMs: number }
  | { op: typeof Op.wait; keys: string[]; timeoutMs: number }
  | { op: typeof Op.check; keys: string[] }
  | { op: typeof Op.add; key: string; delta: number }
  | { op: typeof Op.compareSet; key: string; expected: Uint8Array; desired: Uint8Array }
  | { op: typeof Op.delete; key: string }
  | { op: typeof Op.barrier; name: string; worldSize: number; timeoutMs: number }
  | { op: typeof Op.ping };

/** Reads the rest of a request frame (after its type byte); throws a RendezvousError on anything malformed. */
export function readRequest(frame: FrameReader): Request {
  const op = frame.u8();
  const id = frame.u32();
  const request = readFields(op, frame);
  frame.end();
  return { id, ...request };
}

function readFields(op: number, frame: FrameReader): RequestFields {
  switch (op) {
    case Op.set:
      return { op, key: frame.key(), value: frame.value() };
    case Op.get:
      return { op, key: frame.key(), timeoutMs: readTimeout(frame) };
    case Op.wait:
      return { op, keys: frame.keys(), timeoutMs: readTimeout(frame) };
    case Op.check:
      return { op, keys: frame.keys() };
    case Op.add: {
      const key = frame.key();
      return { op, key, delta: frame.f64() };
    }
    case Op.compareSet:
      return { op, key: frame.key(), expected: frame.value(), desired: frame.value() };
    case Op.delete:
      return { op, key: frame.key() };
    case Op.barrier: {
      const name = frame.key();
      const worldSize = frame.u32();
      if (worldSize === 0) throw new RendezvousError(`barrier '${name}' with worldSize 0`);
      return { op, name, worldSize, timeoutMs: readTimeout(frame) };
    }
    case Op.ping:
      return { op };
    default:
      throw new RendezvousError(`unknown operation ${op}`);
  }
}

function readTimeout(frame: FrameReader): number {
  const timeoutMs = frame.u32();
  if (timeoutMs === 0) throw new RendezvousError('a wait with a timeout of 0 ms');
  return Math.min(timeoutMs, MAX_TIMEOUT_MS);
}

/** Bytes of a request's body before its fields: type, op, id. */
export const REQUEST_HEAD_BYTES = 6;

/**
 * The largest body a request of `op` may have, so a set cannot announce the
 * two values' worth of bytes a compareSet may carry, and an unknown op is
 * refused before its body is buffered.
 */
export function maxRequestBytes(op: number, limits: Limits): number {
  const key = 2 + limits.maxKeyBytes;
  const value = 4 + limits.maxValueBytes;
  const keyList = 4 + MAX_KEYS_PER_CALL * key;
  const fields: Record<number, number> = {
    [Op.set]: key + value,
    [Op.get]: key + 4,
    [Op.wait]: keyList + 4,
    [Op.check]: keyList,
    [Op.add]: key + 8,
    [Op.compareSet]: key + 2 * value,
    [Op.delete]: key,
    [Op.barrier]: key + 8,
    [Op.ping]: 0,
  };
  const size = fields[op];
  if (size === undefined) throw new RendezvousError(`unknown operation ${op}`);
  return REQUEST_HEAD_BYTES + size;
}
