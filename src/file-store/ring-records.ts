/**
 * The records rank pairs exchange through their rings (ring-channels.ts),
 * little-endian:
 *   value:    u8 type (1 inline, 2 in the producer's arena, 3 in a value file, 6 in the
 *             producer's own memory), u32 id, u8 dtype, u8 dims, u16 key bytes, u16 tag bytes,
 *             f64 per dim, key, tag, then
 *               inline: the payload;  arena: u32 arena index, u32 producer nonce, f64 offset;
 *               remote: u32 producer pid, f64 address
 *   finished: u8 4, u32 id, u8 outcome (0 ok, 1 error, 2 mismatch), u16 error bytes, error
 *   withdraw: u8 5, u32 id
 * Only ranks of one node write them, but into memory any process of the user
 * can map, so the decoder checks every field against its bound and names
 * what was wrong, always as a FileStoreCorruptError.
 */
import {
  encodeBounded,
  MAX_DIMS,
  MAX_ERROR_BYTES,
  MAX_KEY_BYTES,
  MAX_TAG_BYTES,
} from '../runtime/store-limits.ts';
import type { StoreFinishOptions } from '../runtime/tensor-store.ts';
import { type DType, dtypeCode, dtypeFromCode, itemSize } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { FileStoreCorruptError } from './errors.ts';
import type { ArenaRef } from './value-header.ts';

export const RecordType = { inline: 1, arena: 2, file: 3, finished: 4, withdraw: 5, remote: 6 } as const;
const VALUE_TYPES = new Set<number>([
  RecordType.inline,
  RecordType.arena,
  RecordType.file,
  RecordType.remote,
]);

/** Where a value's payload is, as its producer sends it. */
export type PayloadAt =
  | { at: 'inline' }
  | { at: 'arena'; ref: ArenaRef; nonce: number }
  | { at: 'file' }
  | { at: 'remote'; pid: number; address: number };

export interface ValueRecord {
  type: 'value';
  id: number;
  key: string;
  tag: string;
  dtype: DType;
  shape: number[];
  nbytes: number;
  /** Where the payload is: in the record (a view into the ring), the producer's arena or memory, or a value file. */
  payload: Exclude<PayloadAt, { at: 'inline' }> | { at: 'inline'; bytes: Uint8Array };
}

export interface FinishedRecord {
  type: 'finished';
  id: number;
  failure: { error: string; mismatch: boolean } | undefined;
}

export type RingRecord = ValueRecord | FinishedRecord | { type: 'withdraw'; id: number };

const decoder = new TextDecoder('utf-8', { fatal: true });
const VALUE_FIXED = 1 + 4 + 1 + 1 + 2 + 2;

/** A value's record, as the parts ByteRing.tryWrite takes (an inline payload is not copied here). */
export function valueRecord(
  id: number,
  key: Uint8Array,
  tag: Uint8Array,
  tensor: Tensor,
  payload: PayloadAt,
): Uint8Array[] {
  const dims = tensor.shape.length;
  const extra = payload.at === 'arena' ? 16 : payload.at === 'remote' ? 12 : 0;
  const head = new Uint8Array(VALUE_FIXED + 8 * dims + key.length + tag.length + extra);
  const view = new DataView(head.buffer);
  view.setUint8(0, RecordType[payload.at]);
  view.setUint32(1, id, true);
  view.setUint8(5, dtypeCode(tensor.dtype));
  view.setUint8(6, dims);
  view.setUint16(7, key.length, true);
  view.setUint16(9, tag.length, true);
  let at = VALUE_FIXED;
  for (const d of tensor.shape) {
    view.setFloat64(at, d, true);
    at += 8;
  }
  head.set(key, at);
  head.set(tag, at + key.length);
  at += key.length + tag.length;
  if (payload.at === 'arena') {
    view.setUint32(at, payload.ref.index, true);
    view.setUint32(at + 4, payload.nonce, true);
    view.setFloat64(at + 8, payload.ref.offset, true);
  } else if (payload.at === 'remote') {
    view.setUint32(at, payload.pid, true);
    view.setFloat64(at + 4, payload.address, true);
  }
  return payload.at === 'inline' && tensor.nbytes > 0 ? [head, tensor.bytes()] : [head];
}

export function finishedRecord(id: number, options: StoreFinishOptions): Uint8Array {
  const text =
    options.error === undefined ? new Uint8Array(0) : encodeBounded(options.error, MAX_ERROR_BYTES);
  const record = new Uint8Array(8 + text.length);
  const view = new DataView(record.buffer);
  view.setUint8(0, RecordType.finished);
  view.setUint32(1, id, true);
  view.setUint8(5, options.error === undefined ? 0 : options.mismatch ? 2 : 1);
  view.setUint16(6, text.length, true);
  record.set(text, 8);
  return record;
}

export function withdrawRecord(id: number): Uint8Array {
  const record = new Uint8Array(5);
  record[0] = RecordType.withdraw;
  new DataView(record.buffer).setUint32(1, id, true);
  return record;
}

function corrupt(what: string): never {
  throw new FileStoreCorruptError(what);
}

/** UTF-8 text of a record, refused naming `what` when it is not valid UTF-8. */
function textOf(bytes: Uint8Array, what: string): string {
  try {
    return decoder.decode(bytes);
  } catch {
    return corrupt(`${what} is not valid UTF-8`);
  }
}

/** Reads a record in place (an inline payload stays a view into `body`); a FileStoreCorruptError names what is malformed. */
export function decodeRecord(body: Uint8Array): RingRecord {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const need = (bytes: number, what: string) => {
    if (body.length < bytes)
      corrupt(`a ${what} record of ${body.length} bytes is cut short (${bytes} needed)`);
  };
  need(5, 'ring');
  const type = view.getUint8(0);
  const id = view.getUint32(1, true);
  if (type === RecordType.withdraw) return { type: 'withdraw', id };
  if (type === RecordType.finished) {
    need(8, 'finished');
    const outcome = view.getUint8(5);
    const length = view.getUint16(6, true);
    if (outcome > 2 || length > MAX_ERROR_BYTES || body.length !== 8 + length) {
      corrupt(`a finished record holds outcome ${outcome} and ${length} error bytes in ${body.length}`);
    }
    const failure =
      outcome === 0
        ? undefined
        : { error: textOf(body.subarray(8), "a finished record's error text"), mismatch: outcome === 2 };
    return { type: 'finished', id, failure };
  }
  if (!VALUE_TYPES.has(type)) corrupt(`unknown record type ${type}`);
  need(VALUE_FIXED, 'value');
  const dtype = dtypeOf(view.getUint8(5));
  const dims = view.getUint8(6);
  const keyBytes = view.getUint16(7, true);
  const tagBytes = view.getUint16(9, true);
  if (dims > MAX_DIMS || keyBytes === 0 || keyBytes > MAX_KEY_BYTES || tagBytes > MAX_TAG_BYTES) {
    corrupt(
      `a value record declares ${dims} dims (at most ${MAX_DIMS}), a key of ${keyBytes} bytes ` +
        `(1..${MAX_KEY_BYTES}) and a tag of ${tagBytes} bytes (at most ${MAX_TAG_BYTES})`,
    );
  }
  let at = VALUE_FIXED;
  need(at + 8 * dims + keyBytes + tagBytes, 'value');
  const shape: number[] = [];
  let numel = 1;
  for (let d = 0; d < dims; d++, at += 8) {
    const size = view.getFloat64(at, true);
    if (!Number.isSafeInteger(size) || size < 0) corrupt(`a value record has size ${size} in dimension ${d}`);
    shape.push(size);
    numel *= size;
  }
  const key = textOf(body.subarray(at, at + keyBytes), "a value record's key");
  const tag = textOf(body.subarray(at + keyBytes, at + keyBytes + tagBytes), "a value record's tag");
  at += keyBytes + tagBytes;
  const nbytes = numel * itemSize(dtype);
  if (!Number.isSafeInteger(nbytes)) corrupt(`a value record's shape [${shape}] is too large`);
  // One literal: a spread followed by a key it lacks (`{ ...value, payload }`) leaves V8's fast path.
  return {
    type: 'value',
    id,
    key,
    tag,
    dtype,
    shape,
    nbytes,
    payload: valuePayload(type, body, view, at, nbytes),
  };
}

/** Where a value record of `type` says its payload is; `at` is where the payload (or its reference) starts. */
function valuePayload(
  type: number,
  body: Uint8Array,
  view: DataView,
  at: number,
  nbytes: number,
): ValueRecord['payload'] {
  if (type === RecordType.inline) {
    if (body.length !== at + nbytes) {
      corrupt(`an inline value of ${nbytes} bytes comes with ${body.length - at} payload bytes`);
    }
    return { at: 'inline', bytes: body.subarray(at) };
  }
  if (type === RecordType.file) {
    if (body.length !== at) corrupt(`a value file record has ${body.length - at} trailing bytes`);
    return { at: 'file' };
  }
  if (type === RecordType.remote) {
    if (body.length !== at + 12)
      corrupt(`a remote value record is ${body.length} bytes, ${at + 12} expected`);
    const address = view.getFloat64(at + 4, true);
    if (!Number.isSafeInteger(address) || address <= 0)
      corrupt(`a remote value record has address ${address}`);
    return { at: 'remote', pid: view.getUint32(at, true), address };
  }
  if (body.length !== at + 16) corrupt(`an arena value record is ${body.length} bytes, ${at + 16} expected`);
  const index = view.getUint32(at, true);
  const nonce = view.getUint32(at + 4, true);
  const offset = view.getFloat64(at + 8, true);
  if (!Number.isSafeInteger(offset) || offset < 0) corrupt(`an arena value record has offset ${offset}`);
  return { at: 'arena', ref: { index, offset }, nonce };
}

function dtypeOf(code: number): DType {
  try {
    return dtypeFromCode(code);
  } catch {
    return corrupt(`a value record has unknown dtype code ${code}`);
  }
}
