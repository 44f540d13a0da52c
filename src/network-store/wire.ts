/**
 * The network store's frames (docs/design.md, "Network-store frames"). They
 * use the rendezvous framing (`u32 body length`, `u8 type`, fields, all BE)
 * with one limit for every frame, so a stranger can make this rank buffer at
 * most FRAME_LIMIT bytes. A value's payload is the one thing outside the
 * framing: it follows its header raw, so the producer writes it straight from
 * the tensor's memory and the consumer reads it straight into the tensor it
 * allocated, and its length was checked against the limits before that.
 */
import { RendezvousError } from '../rendezvous/errors.ts';
import { FrameReader, FrameWriter, type Limits } from '../rendezvous/protocol.ts';
import {
  encodeBounded,
  encodeKey,
  MAX_DIMS,
  MAX_ERROR_BYTES,
  MAX_KEY_BYTES,
  MAX_TAG_BYTES,
} from '../runtime/store-limits.ts';
import type { StoreFinishOptions } from '../runtime/tensor-store.ts';
import { type DType, dtypeCode, dtypeFromCode, itemSize } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { NetworkStoreFrameError } from './errors.ts';

export const MAGIC = 0x54434e53; // 'TCNS'
export const VERSION = 1;
/** Every frame, handshake or not, fits in this; a longer declared length is refused before it is buffered. */
export const FRAME_LIMIT = 4096;
export const FATAL_TEXT_CHARS = 500;

export const Frame = {
  hello: 1,
  join: 2,
  welcome: 3,
  value: 4,
  finished: 5,
  withdraw: 6,
  fatal: 7,
  status: 8,
  want: 9,
} as const;

/** A status row (a rank's debug snapshot as JSON) is at most this long. */
export const MAX_STATUS_BYTES = 256 << 10;

const Outcome = { ok: 0, error: 1, mismatch: 2 } as const;

/** Keys are bounded as in every TensorStore; FrameReader checks them on read. */
export const WIRE_LIMITS: Limits = { maxKeyBytes: MAX_KEY_BYTES, maxValueBytes: 0 };

const decoder = new TextDecoder('utf-8', { fatal: true });

export interface ValueHeader {
  id: number;
  key: string;
  tag: string;
  dtype: DType;
  shape: number[];
  nbytes: number;
}

export interface Finished {
  id: number;
  failure: { error: string; mismatch: boolean } | undefined;
}

/** Refuses a key (naming the call) unless its UTF-8 is 1..MAX_KEY_BYTES long. */
export function checkKey(key: string, where: () => string): void {
  encodeKey(key, where);
}

/** The header of a value; `tensor.bytes()` follows it on the connection. */
export function valueHeaderFrame(id: number, key: string, tag: Uint8Array, tensor: Tensor): Buffer {
  const w = new FrameWriter(Frame.value)
    .u32(id)
    .key(key)
    .bytes(tag)
    .u8(dtypeCode(tensor.dtype))
    .u8(tensor.shape.length);
  for (const size of tensor.shape) w.f64(size);
  return w.f64(tensor.nbytes).finish();
}

/** A value's header, checked so that its payload fits `maxValueBytes` before anything is allocated for it. */
function readValueHeader(frame: FrameReader, maxValueBytes: number): ValueHeader {
  const id = frame.u32();
  const key = frame.key();
  const tag = boundedText(frame, MAX_TAG_BYTES, 'tag');
  const code = frame.u8();
  let dtype: DType;
  try {
    dtype = dtypeFromCode(code);
  } catch {
    throw new NetworkStoreFrameError(`value of key ${JSON.stringify(key)} has unknown dtype code ${code}`);
  }
  const ndim = frame.u8();
  if (ndim > MAX_DIMS) {
    throw new NetworkStoreFrameError(
      `value of key ${JSON.stringify(key)} has ${ndim} dimensions, at most ${MAX_DIMS}`,
    );
  }
  const shape: number[] = [];
  let numel = 1;
  for (let d = 0; d < ndim; d++) {
    const size = frame.f64();
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new NetworkStoreFrameError(
        `value of key ${JSON.stringify(key)} has size ${size} in dimension ${d}`,
      );
    }
    shape.push(size);
    // Bounded on the way, so a product of huge sizes cannot lose precision before the check.
    numel = Math.min(numel * size, Number.MAX_SAFE_INTEGER);
  }
  const nbytes = frame.f64();
  frame.end();
  const expected = numel * itemSize(dtype);
  if (nbytes !== expected) {
    throw new NetworkStoreFrameError(
      `value of key ${JSON.stringify(key)} declares ${nbytes} payload bytes, but ${dtype}[${shape.join(',')}] has ${expected}`,
    );
  }
  if (nbytes > maxValueBytes) {
    throw new NetworkStoreFrameError(
      `value of key ${JSON.stringify(key)} has ${nbytes} bytes, over this rank's maxValueBytes ${maxValueBytes}`,
    );
  }
  return { id, key, tag, dtype, shape, nbytes };
}

export function finishedFrame(id: number, options: StoreFinishOptions): Buffer {
  const outcome =
    options.error === undefined ? Outcome.ok : options.mismatch ? Outcome.mismatch : Outcome.error;
  return new FrameWriter(Frame.finished)
    .u32(id)
    .u8(outcome)
    .bytes(encodeBounded(options.error ?? '', MAX_ERROR_BYTES))
    .finish();
}

function readFinished(frame: FrameReader): Finished {
  const id = frame.u32();
  const outcome = frame.u8();
  const error = boundedText(frame, MAX_ERROR_BYTES, 'error text');
  frame.end();
  if (outcome === Outcome.ok) return { id, failure: undefined };
  if (outcome === Outcome.error || outcome === Outcome.mismatch) {
    return { id, failure: { error, mismatch: outcome === Outcome.mismatch } };
  }
  throw new NetworkStoreFrameError(`finish of value ${id} has unknown outcome ${outcome}`);
}

/** The header of a status row; its `nbytes` bytes of JSON follow raw. */
export function statusHeaderFrame(nbytes: number): Buffer {
  return new FrameWriter(Frame.status).u32(nbytes).finish();
}

function readStatusHeader(frame: FrameReader): number {
  const nbytes = frame.u32();
  frame.end();
  if (nbytes > MAX_STATUS_BYTES) {
    throw new NetworkStoreFrameError(
      `status row of ${nbytes} bytes exceeds the limit of ${MAX_STATUS_BYTES}`,
    );
  }
  return nbytes;
}

/** A consumer asks for a value its producer offered (set without naming consumers). */
export function wantFrame(key: string): Buffer {
  return new FrameWriter(Frame.want).key(key).finish();
}

function readWant(frame: FrameReader): string {
  const key = frame.key();
  frame.end();
  return key;
}

export function withdrawFrame(id: number): Buffer {
  return new FrameWriter(Frame.withdraw).u32(id).finish();
}

function readWithdraw(frame: FrameReader): number {
  const id = frame.u32();
  frame.end();
  return id;
}

/** Why the sender is closing the connection; the receiver fails its waits on the sender with it. */
export function fatalFrame(message: string): Buffer {
  return new FrameWriter(Frame.fatal).text(message.slice(0, FATAL_TEXT_CHARS)).finish();
}

export function readFatal(frame: FrameReader): string {
  return frame.text();
}

/** `frame` over a frame body, with the wire's limits. */
export function frameReader(body: Buffer): FrameReader {
  return new FrameReader(body, WIRE_LIMITS);
}

/** A frame after the handshake, decoded; a value's or status row's raw bytes follow it on the connection. */
export type WireFrame =
  | { type: 'value'; header: ValueHeader }
  | { type: 'status'; nbytes: number }
  | { type: 'finished'; finished: Finished }
  | { type: 'withdraw'; id: number }
  | { type: 'want'; key: string }
  | { type: 'fatal'; message: string };

/**
 * Decodes one frame body (as FrameDecoder hands it over, so at most
 * FRAME_LIMIT bytes) of an authenticated connection. Declared sizes are checked
 * against `maxValueBytes` and MAX_STATUS_BYTES here, before anyone allocates
 * for them; whatever is wrong is a NetworkStoreFrameError.
 */
export function decodeFrame(body: Buffer, maxValueBytes: number): WireFrame {
  try {
    const frame = frameReader(body);
    const type = frame.u8();
    if (type === Frame.value) return { type: 'value', header: readValueHeader(frame, maxValueBytes) };
    if (type === Frame.status) return { type: 'status', nbytes: readStatusHeader(frame) };
    if (type === Frame.finished) return { type: 'finished', finished: readFinished(frame) };
    if (type === Frame.withdraw) return { type: 'withdraw', id: readWithdraw(frame) };
    if (type === Frame.want) return { type: 'want', key: readWant(frame) };
    if (type === Frame.fatal) return { type: 'fatal', message: readFatal(frame) };
    throw new NetworkStoreFrameError(`unexpected frame type ${type}`);
  } catch (error) {
    // FrameReader's own checks (truncation, key bounds, trailing bytes) speak for the rendezvous framing.
    // Anything else is a bug here, left as it is rather than passed off as a malformed frame.
    if (!(error instanceof RendezvousError)) throw error;
    throw new NetworkStoreFrameError(error.message, { cause: error });
  }
}

function boundedText(frame: FrameReader, maxBytes: number, what: string): string {
  const length = frame.u32();
  if (length > maxBytes)
    throw new NetworkStoreFrameError(`${what} of ${length} bytes exceeds the limit of ${maxBytes}`);
  try {
    return decoder.decode(frame.raw(length));
  } catch {
    throw new NetworkStoreFrameError(`${what} is not valid UTF-8`);
  }
}
