/**
 * The binary header that leads every send()/broadcast() message (docs/design.md
 * decision 5): a pure encoder/decoder with bounded sizes and checked counts, so
 * a malformed or hostile header is a P2PHeaderError, never a crash or an
 * allocation larger than the header itself. Tensor bytes are not in here; they
 * follow as tensors on their device's data stream.
 *
 * Layout, little-endian (version 3; version 2 sent one compressed block per tensor, version 1 had no codec):
 *   0  u32 magic 'TCP2'    4 u8 version    5 u8 kind    6 u8 codec (0 none, 1 lz4, 2 zstd)    7 u8 reserved (0)
 *   8  u32 seq            12 u32 tensor count          16 u32 skeleton bytes
 *   20 u32 total header bytes (framing: must equal what arrived)
 *   24 per tensor: u8 dtype, u8 device kind, u16 device index, u8 ndim, u8 compressed (0|1), 2 × u8 0,
 *      f64 chunk bytes (0 when raw; else 1 ≤ n ≤ raw bytes, CPU tensors only: the tensor travels
 *      as ceil(raw / n) chunks of n raw bytes, the last shorter, each compressed on its own; see
 *      compression/tensor-compressor.ts), then ndim × f64 sizes (safe non-negative integers)
 *   then the skeleton: v8.serialize of the value with tensors replaced by placeholders
 */
import { deserialize } from 'node:v8';
import { type Device, DTYPES, type DType, itemSize } from '../tensor/dtype.ts';
import { checkSize } from '../tensor/shape.ts';
import { P2PHeaderError } from './errors.ts';

export const HEADER_MAGIC = 0x32504354; // 'TCP2' read as a little-endian u32
export const HEADER_VERSION = 3;
const FIXED_BYTES = 24;
const RECORD_BYTES = 16;
/** Codec ids on the wire; index 0 is "not compressed". */
export const WIRE_CODECS = [undefined, 'lz4', 'zstd'] as const;
export type WireCodec = 'lz4' | 'zstd';

export const MessageKind = { message: 1, broadcast: 2 } as const;
export type MessageKind = (typeof MessageKind)[keyof typeof MessageKind];

export interface HeaderLimits {
  /** Largest header accepted, skeleton included. */
  maxHeaderBytes: number;
  maxTensors: number;
  maxDims: number;
  /**
   * Largest sum of tensor bytes one message may declare: what the receiver allocates before the data
   * comes (default 16 GiB; cluster.collective.max_message_bytes sets it per worker).
   */
  maxMessageBytes: number;
  /** Most compressed chunks one message may declare (a receive is posted for each). */
  maxChunks: number;
}

export const DEFAULT_HEADER_LIMITS: HeaderLimits = Object.freeze({
  maxHeaderBytes: 256 * 2 ** 20,
  maxTensors: 65_536,
  maxDims: 16,
  maxMessageBytes: 16 * 2 ** 30,
  maxChunks: 2 ** 20,
});

/** How many chunks of `chunkBytes` raw bytes a tensor of `rawBytes` travels in (the last one shorter). */
export function chunkCount(rawBytes: number, chunkBytes: number): number {
  return Math.ceil(rawBytes / chunkBytes);
}

/** Chunk `k` of `bytes` cut in chunks of `chunkBytes`. */
export function chunkOf(bytes: Uint8Array, chunkBytes: number, k: number): Uint8Array {
  return bytes.subarray(k * chunkBytes, Math.min((k + 1) * chunkBytes, bytes.length));
}

export interface TensorSpec {
  dtype: DType;
  shape: number[];
  device: Device;
  /** Raw bytes per chunk when the tensor travels compressed, in chunks; absent when raw. */
  chunkBytes?: number;
}

export interface Header {
  kind: MessageKind;
  seq: number;
  tensors: TensorSpec[];
  /** The codec of the message's compressed tensors, if any are. */
  codec?: WireCodec;
  /** The value with tensors replaced by placeholders (see skeleton.ts). */
  skeleton: unknown;
}

export function encodeHeader(
  kind: MessageKind,
  seq: number,
  tensors: readonly TensorSpec[],
  skeleton: Uint8Array,
  codec?: WireCodec,
): Uint8Array {
  let total = FIXED_BYTES + skeleton.length;
  for (const t of tensors) total += RECORD_BYTES + 8 * t.shape.length;
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, HEADER_MAGIC, true);
  view.setUint8(4, HEADER_VERSION);
  view.setUint8(5, kind);
  view.setUint8(6, codec === undefined ? 0 : WIRE_CODECS.indexOf(codec));
  view.setUint32(8, seq >>> 0, true);
  view.setUint32(12, tensors.length, true);
  view.setUint32(16, skeleton.length, true);
  view.setUint32(20, total, true);
  let at = FIXED_BYTES;
  for (const t of tensors) {
    const [deviceKind, deviceIndex] = encodeDevice(t.device);
    view.setUint8(at, DTYPES.indexOf(t.dtype));
    view.setUint8(at + 1, deviceKind);
    view.setUint16(at + 2, deviceIndex, true);
    view.setUint8(at + 4, t.shape.length);
    view.setUint8(at + 5, t.chunkBytes === undefined ? 0 : 1);
    view.setFloat64(at + 8, t.chunkBytes ?? 0, true);
    at += RECORD_BYTES;
    for (const size of t.shape) {
      view.setFloat64(at, size, true);
      at += 8;
    }
  }
  bytes.set(skeleton, at);
  return bytes;
}

/** Checks and decodes a header; every problem is a P2PHeaderError saying what is wrong. */
export function decodeHeader(bytes: Uint8Array, limits: HeaderLimits = DEFAULT_HEADER_LIMITS): Header {
  const fail = (what: string): never => {
    throw new P2PHeaderError(`malformed p2p header (${bytes.length} bytes): ${what}`);
  };
  if (!(bytes instanceof Uint8Array)) fail('not a byte array');
  if (bytes.length < 8) fail(`shorter than the ${FIXED_BYTES}-byte fixed part`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  if (view.getUint32(0, true) !== HEADER_MAGIC) fail('bad magic (not a tensorcomm p2p header)');
  const version = view.getUint8(4);
  if (version > HEADER_VERSION) {
    throw new P2PHeaderError(
      `p2p header version ${version} is newer than this build understands (${HEADER_VERSION}); update tensorcomm on the receiving worker`,
    );
  }
  if (version !== HEADER_VERSION) fail(`unknown version ${version}`);
  if (bytes.length < FIXED_BYTES) fail(`shorter than the ${FIXED_BYTES}-byte fixed part`);
  if (bytes.length > limits.maxHeaderBytes) fail(`larger than the limit of ${limits.maxHeaderBytes} bytes`);
  const kind = view.getUint8(5);
  if (kind !== MessageKind.message && kind !== MessageKind.broadcast) fail(`unknown kind ${kind}`);
  const codecId = view.getUint8(6);
  const codec = codecId === 0 ? undefined : (WIRE_CODECS[codecId] ?? fail(`unknown codec id ${codecId}`));
  if (view.getUint8(7) !== 0) fail('reserved bits are set');
  const count = view.getUint32(12, true);
  const skeletonBytes = view.getUint32(16, true);
  if (view.getUint32(20, true) !== bytes.length) {
    fail(`declares ${view.getUint32(20, true)} bytes but ${bytes.length} arrived (truncated or padded)`);
  }
  if (count > limits.maxTensors) fail(`${count} tensors exceed the limit of ${limits.maxTensors}`);
  // Checked before any per-tensor work, so a huge count costs nothing.
  if (FIXED_BYTES + count * RECORD_BYTES + skeletonBytes > bytes.length) {
    fail(`${count} tensor records and a ${skeletonBytes}-byte skeleton do not fit`);
  }
  const tensors: TensorSpec[] = [];
  let at = FIXED_BYTES;
  let messageBytes = 0;
  let chunks = 0;
  for (let i = 0; i < count; i++) {
    // The check above counted no sizes: earlier tensors' sizes move this record, so it is checked again.
    if (at + RECORD_BYTES + skeletonBytes > bytes.length) {
      fail(
        `tensor ${i}: its ${RECORD_BYTES}-byte record at byte ${at} and the ${skeletonBytes}-byte skeleton run past the end`,
      );
    }
    const dtype = DTYPES[view.getUint8(at)] ?? fail(`tensor ${i}: unknown dtype code ${view.getUint8(at)}`);
    const device = decodeDevice(view.getUint8(at + 1), view.getUint16(at + 2, true), i, fail);
    const ndim = view.getUint8(at + 4);
    if (ndim > limits.maxDims) fail(`tensor ${i}: ${ndim} dimensions exceed the limit of ${limits.maxDims}`);
    const compressed = view.getUint8(at + 5);
    if (compressed > 1) fail(`tensor ${i}: compressed flag ${compressed} is not 0 or 1`);
    if (view.getUint8(at + 6) | view.getUint8(at + 7)) fail(`tensor ${i}: padding set`);
    const chunkBytes = view.getFloat64(at + 8, true);
    if (!compressed && chunkBytes !== 0) fail(`tensor ${i}: a raw tensor declares a chunk size`);
    at += RECORD_BYTES;
    if (at + 8 * ndim + skeletonBytes > bytes.length) fail(`tensor ${i}: sizes run past the end`);
    const shape: number[] = [];
    let numel = 1;
    for (let d = 0; d < ndim; d++, at += 8) {
      const size = view.getFloat64(at, true);
      if (!Number.isSafeInteger(size) || size < 0) fail(`tensor ${i}: size ${size} of dim ${d} is invalid`);
      shape.push(size);
      numel *= size;
    }
    const rawBytes = numel * itemSize(dtype);
    messageBytes += rawBytes;
    if (!(messageBytes <= limits.maxMessageBytes)) {
      fail(
        `tensor ${i} (${dtype}[${shape.join(',')}]) brings the message to ${messageBytes} bytes, over the ` +
          `limit of ${limits.maxMessageBytes} (cluster.collective.max_message_bytes)`,
      );
    }
    try {
      checkSize(shape, dtype, `tensor ${i}`);
    } catch (error) {
      fail((error as Error).message);
    }
    const spec: TensorSpec = { dtype, shape, device };
    if (compressed) {
      if (codec === undefined) fail(`tensor ${i} is compressed but the header names no codec`);
      if (device !== 'cpu') fail(`tensor ${i} on ${device} is compressed; only CPU tensors are`);
      if (!Number.isSafeInteger(chunkBytes) || chunkBytes < 1 || chunkBytes > rawBytes) {
        fail(`tensor ${i}: chunk size ${chunkBytes} is not in 1..${rawBytes} (its raw size is ${rawBytes})`);
      }
      chunks += chunkCount(rawBytes, chunkBytes);
      if (chunks > limits.maxChunks)
        fail(`tensors declare more than the limit of ${limits.maxChunks} chunks`);
      spec.chunkBytes = chunkBytes;
    }
    tensors.push(spec);
  }
  if (at + skeletonBytes !== bytes.length) fail('the skeleton length does not match the header length');
  let skeleton: unknown;
  try {
    skeleton = deserialize(bytes.subarray(at));
  } catch (error) {
    fail(`the skeleton cannot be deserialized: ${(error as Error).message}`);
  }
  const header: Header = { kind: kind as MessageKind, seq: view.getUint32(8, true), tensors, skeleton };
  if (codec !== undefined) header.codec = codec;
  return header;
}

function encodeDevice(device: Device): [number, number] {
  if (device === 'cpu') return [0, 0];
  return [1, Number(device.slice('cuda:'.length))];
}

function decodeDevice(kind: number, index: number, i: number, fail: (what: string) => never): Device {
  if (kind === 0 && index === 0) return 'cpu';
  if (kind === 1) return `cuda:${index}`;
  return fail(`tensor ${i}: unknown device ${kind}:${index}`);
}
