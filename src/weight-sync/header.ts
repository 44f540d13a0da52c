/**
 * The binary header that travels before each bucket's payload: which tensor
 * chunks the payload holds and where. Little-endian, versioned and bounded:
 * the decoder checks every count and length against the bytes actually
 * present and against fixed limits before it allocates anything, so a
 * malformed header is a WeightSyncHeaderError, never a crash or a huge
 * allocation. (Objects from the wire are never deserialized into code or
 * free-form structures; see docs/design.md, decision 5.)
 *
 *   fixed part (32 B): magic u32 'TCWS' | version u16 | flags u16 (bit 0: last bucket;
 *                      bit 1: the payload travels as one lent view per entry, not packed)
 *                      | bucket index u32 | entry count u32 | payload bytes u32 | sync u32
 *                      | stream digest u32 | unchanged since u32 (0: the payload follows; n: it
 *                      does not, the bucket is as in the sender's sync n, see delta.ts)
 *   per entry:         name length u16 | name UTF-8 | dtype code u8 | ndim u8 | dims u32 × ndim
 *                      | offset in payload u32 | chunk start in tensor u32 | chunk bytes u32
 */
import { type DType, dtypeCode, dtypeFromCode, itemSize } from '../tensor/dtype.ts';
import { WeightSyncHeaderError } from './errors.ts';

export const HEADER_MAGIC = 0x53574354; // 'TCWS' read as a little-endian u32
export const HEADER_VERSION = 2;
export const FIXED_HEADER_BYTES = 32;
/**
 * The fields from the sync number to the end of the fixed part say when and how this bucket
 * travels, not what it holds: the stream digest (digest.ts) and a bucket's delta digest
 * (delta.ts) read them as zero, so they are the same for every sender and every sync.
 */
export const TRAVEL_FIELDS = { from: 20, to: FIXED_HEADER_BYTES } as const;
const SYNC_OFFSET = 20;
/** Where the digest sits, to be stamped once computed. */
export const DIGEST_OFFSET = 24;
const UNCHANGED_OFFSET = 28;
/** Every chunk starts at a multiple of this, whatever the dtypes before it (float64/int64 need 8; 16 leaves room for SIMD). */
export const PAYLOAD_ALIGN = 16;

export const HEADER_LIMITS = {
  maxHeaderBytes: 16 << 20,
  maxEntries: 1 << 20,
  maxNameBytes: 1024,
  maxDims: 8,
  /** Tensors stay addressable by one typed array (the Tensor limit). */
  maxTensorBytes: 2 ** 32,
} as const;

/** name length + dtype + ndim + offset + chunk start + chunk bytes, with an empty name and no dims. */
const MIN_ENTRY_BYTES = 2 + 1 + 1 + 12;
const FLAG_LAST = 1;
const FLAG_VIEWS = 2;

export interface BucketEntry {
  name: string;
  dtype: DType;
  shape: readonly number[];
  /** Byte offset of the chunk in the bucket payload (a multiple of PAYLOAD_ALIGN). */
  offset: number;
  /** Byte offset of the chunk in the whole tensor: non-zero for the second and later pieces of a split tensor. */
  chunkStart: number;
  chunkBytes: number;
}

export interface BucketHeader {
  index: number;
  last: boolean;
  /** The used part of the bucket: only these bytes travel. */
  payloadBytes: number;
  /** The sender's sync this bucket belongs to, counted from 1 per engine (every sender counts alike). */
  sync: number;
  /** Running digest of every header of the stream up to this one (see digest.ts). */
  digest: number;
  /**
   * 0 when the payload follows. Otherwise the bucket was skipped in delta
   * mode: no payload travels, since it is what the sender's sync
   * `unchangedSince` sent (delta.ts).
   */
  unchangedSince: number;
  /**
   * The entries travel as views on the sender's tensors (ThreadGroup.sendViews),
   * one per entry in order, rather than packed at their offsets; the offsets
   * still give the bucket's layout.
   */
  views: boolean;
  entries: readonly BucketEntry[];
}

/** How many tensors of the stream begin in these entries (a split tensor's later pieces continue one). */
export function startedTensors(entries: readonly BucketEntry[]): number {
  return entries.reduce((n, e) => (e.chunkStart === 0 ? n + 1 : n), 0);
}

export function alignUp(n: number): number {
  return Math.ceil(n / PAYLOAD_ALIGN) * PAYLOAD_ALIGN;
}

export function tensorBytes(dtype: DType, shape: readonly number[]): number {
  let n = itemSize(dtype);
  for (const size of shape) n *= size;
  return n;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 length of `s`; names are almost always ASCII, which needs no encoding to measure. */
export function utf8Length(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return encoder.encode(s).length;
  return s.length;
}

export function encodeBucketHeader(header: BucketHeader): Uint8Array {
  const { entries } = header;
  const nameBytes = new Array<number>(entries.length);
  let size = FIXED_HEADER_BYTES;
  for (let i = 0; i < entries.length; i++) {
    nameBytes[i] = utf8Length(entries[i].name);
    size += MIN_ENTRY_BYTES + nameBytes[i] + 4 * entries[i].shape.length;
  }
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, HEADER_MAGIC, true);
  view.setUint16(4, HEADER_VERSION, true);
  view.setUint16(6, (header.last ? FLAG_LAST : 0) | (header.views ? FLAG_VIEWS : 0), true);
  view.setUint32(8, header.index, true);
  view.setUint32(12, entries.length, true);
  view.setUint32(16, header.payloadBytes, true);
  view.setUint32(SYNC_OFFSET, header.sync, true);
  view.setUint32(DIGEST_OFFSET, header.digest >>> 0, true);
  view.setUint32(UNCHANGED_OFFSET, header.unchangedSince, true);
  let at = FIXED_HEADER_BYTES;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    view.setUint16(at, nameBytes[i], true);
    writeName(e.name, nameBytes[i], bytes, at + 2);
    at += 2 + nameBytes[i];
    view.setUint8(at, dtypeCode(e.dtype));
    view.setUint8(at + 1, e.shape.length);
    at += 2;
    for (const d of e.shape) {
      view.setUint32(at, d, true);
      at += 4;
    }
    view.setUint32(at, e.offset, true);
    view.setUint32(at + 4, e.chunkStart, true);
    view.setUint32(at + 8, e.chunkBytes, true);
    at += 12;
  }
  return bytes;
}

/** Marks an encoded header's bucket as skipped, unchanged since the sender's sync `since` (0: sent). */
export function setUnchangedSince(bytes: Uint8Array, since: number): void {
  new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setUint32(UNCHANGED_OFFSET, since, true);
}

function writeName(name: string, length: number, bytes: Uint8Array, at: number): void {
  if (length !== name.length) {
    encoder.encodeInto(name, bytes.subarray(at, at + length));
    return;
  }
  for (let i = 0; i < length; i++) bytes[at + i] = name.charCodeAt(i);
}

/** ASCII read directly (the common case); anything else goes through the strict decoder. */
function readName(bytes: Uint8Array, at: number, length: number): string {
  let ascii = true;
  for (let i = at; i < at + length && ascii; i++) ascii = bytes[i] < 0x80;
  const slice = bytes.subarray(at, at + length);
  return ascii ? String.fromCharCode.apply(null, slice as unknown as number[]) : decoder.decode(slice);
}

/**
 * Reads fields in order; every read checks that the bytes are there. A field
 * is named by its entry and a fixed label, spelled out only in an error.
 */
class Reader {
  at = FIXED_HEADER_BYTES;
  readonly #view: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  #need(n: number, entry: number, field: string): void {
    if (this.at + n > this.bytes.byteLength) {
      throw new WeightSyncHeaderError(
        `malformed weight-sync header: truncated at byte ${this.at} while reading entry ${entry} ${field} (${this.bytes.byteLength} bytes in all)`,
      );
    }
  }
  u8(entry: number, field: string): number {
    this.#need(1, entry, field);
    return this.#view.getUint8(this.at++);
  }
  u16(entry: number, field: string): number {
    this.#need(2, entry, field);
    const v = this.#view.getUint16(this.at, true);
    this.at += 2;
    return v;
  }
  u32(entry: number, field: string): number {
    this.#need(4, entry, field);
    const v = this.#view.getUint32(this.at, true);
    this.at += 4;
    return v;
  }
  utf8(length: number, entry: number, field: string): string {
    this.#need(length, entry, field);
    const at = this.at;
    this.at += length;
    try {
      return readName(this.bytes, at, length);
    } catch {
      throw new WeightSyncHeaderError(
        `malformed weight-sync header: entry ${entry} ${field} is not valid UTF-8`,
      );
    }
  }
}

function fail(message: string): never {
  throw new WeightSyncHeaderError(`malformed weight-sync header: ${message}`);
}

/**
 * Parses and checks a header. `maxPayloadBytes` is the receiver's bucket size:
 * a payload larger than the buffer it must land in is refused here; so is a
 * tensor over `maxTensorBytes` (what the receiver would allocate for it).
 */
export function decodeBucketHeader(
  bytes: unknown,
  maxPayloadBytes: number,
  maxTensorBytes: number = HEADER_LIMITS.maxTensorBytes,
): BucketHeader {
  if (!(bytes instanceof Uint8Array)) fail(`expected bytes, got ${typeof bytes}`);
  if (bytes.byteLength < FIXED_HEADER_BYTES) {
    fail(`${bytes.byteLength} bytes, shorter than the ${FIXED_HEADER_BYTES}-byte fixed part`);
  }
  if (bytes.byteLength > HEADER_LIMITS.maxHeaderBytes) {
    fail(`${bytes.byteLength} bytes, over the ${HEADER_LIMITS.maxHeaderBytes}-byte limit`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint32(0, true);
  if (magic !== HEADER_MAGIC)
    fail(`bad magic 0x${magic.toString(16)} (expected 0x${HEADER_MAGIC.toString(16)})`);
  const version = view.getUint16(4, true);
  if (version !== HEADER_VERSION) fail(`unsupported version ${version} (this build reads ${HEADER_VERSION})`);
  const flags = view.getUint16(6, true);
  if ((flags & ~(FLAG_LAST | FLAG_VIEWS)) !== 0) fail(`unknown flags 0x${flags.toString(16)}`);
  const index = view.getUint32(8, true);
  const count = view.getUint32(12, true);
  const payloadBytes = view.getUint32(16, true);
  const sync = view.getUint32(SYNC_OFFSET, true);
  const digest = view.getUint32(DIGEST_OFFSET, true);
  const unchangedSince = view.getUint32(UNCHANGED_OFFSET, true);
  if (unchangedSince >= sync && unchangedSince !== 0)
    fail(`bucket of sync ${sync} unchanged since sync ${unchangedSince}, which is not an earlier one`);
  // Bounding the count by the bytes present stops a tiny header from asking for a huge entry array.
  const room = Math.floor((bytes.byteLength - FIXED_HEADER_BYTES) / MIN_ENTRY_BYTES);
  if (count > HEADER_LIMITS.maxEntries || count > room) {
    fail(
      `entry count ${count} exceeds what ${bytes.byteLength} bytes can hold (limit ${HEADER_LIMITS.maxEntries})`,
    );
  }
  if (payloadBytes > maxPayloadBytes)
    fail(`payload of ${payloadBytes} bytes exceeds the ${maxPayloadBytes}-byte bucket`);
  const reader = new Reader(bytes);
  const entries: BucketEntry[] = [];
  let end = 0;
  for (let i = 0; i < count; i++) {
    const entry = readEntry(reader, i, maxTensorBytes);
    if (entry.offset < end)
      fail(
        `entry ${i} ('${entry.name}') at offset ${entry.offset} overlaps the previous chunk ending at ${end}`,
      );
    end = entry.offset + entry.chunkBytes;
    if (end > payloadBytes)
      fail(`entry ${i} ('${entry.name}') ends at byte ${end}, past the ${payloadBytes}-byte payload`);
    entries.push(entry);
  }
  if (reader.at !== bytes.byteLength)
    fail(`${bytes.byteLength - reader.at} unexpected bytes after entry ${count - 1}`);
  const views = (flags & FLAG_VIEWS) !== 0;
  const last = (flags & FLAG_LAST) !== 0;
  return { index, last, payloadBytes, sync, digest, unchangedSince, views, entries };
}

function readEntry(reader: Reader, i: number, maxTensorBytes: number): BucketEntry {
  const nameBytes = reader.u16(i, 'name length');
  if (nameBytes > HEADER_LIMITS.maxNameBytes)
    fail(`entry ${i} name of ${nameBytes} bytes exceeds ${HEADER_LIMITS.maxNameBytes}`);
  const name = reader.utf8(nameBytes, i, 'name');
  const code = reader.u8(i, 'dtype');
  let dtype: DType;
  try {
    dtype = dtypeFromCode(code);
  } catch {
    fail(`entry ${i} ('${name}') has unknown dtype code ${code}`);
  }
  const ndim = reader.u8(i, 'ndim');
  if (ndim > HEADER_LIMITS.maxDims)
    fail(`entry ${i} ('${name}') has ${ndim} dims (limit ${HEADER_LIMITS.maxDims})`);
  const shape: number[] = new Array(ndim);
  for (let d = 0; d < ndim; d++) shape[d] = reader.u32(i, DIM_FIELDS[d]);
  const offset = reader.u32(i, 'offset');
  const chunkStart = reader.u32(i, 'chunk start');
  const chunkBytes = reader.u32(i, 'chunk bytes');
  const total = tensorBytes(dtype, shape);
  if (total > maxTensorBytes)
    fail(
      `${describeEntry(i, name, dtype, shape)} needs ${total} bytes (limit ${maxTensorBytes}, maxTensorBytes)`,
    );
  if (offset % PAYLOAD_ALIGN !== 0)
    fail(`${describeEntry(i, name, dtype, shape)} offset ${offset} is not a multiple of ${PAYLOAD_ALIGN}`);
  const item = itemSize(dtype);
  if (chunkStart % item !== 0 || chunkBytes % item !== 0) {
    fail(
      `${describeEntry(i, name, dtype, shape)} chunk [${chunkStart}, +${chunkBytes}) does not fall on ${item}-byte element boundaries`,
    );
  }
  if (chunkStart + chunkBytes > total)
    fail(
      `${describeEntry(i, name, dtype, shape)} chunk [${chunkStart}, +${chunkBytes}) runs past its ${total} bytes`,
    );
  if (chunkBytes === 0 && total !== 0) fail(`${describeEntry(i, name, dtype, shape)} has an empty chunk`);
  return { name, dtype, shape, offset, chunkStart, chunkBytes };
}

/** Spelled out only for a bad entry: a header holds one entry per tensor of the bucket. */
function describeEntry(i: number, name: string, dtype: DType, shape: readonly number[]): string {
  return `entry ${i} ('${name}', ${dtype}[${shape.join(',')}])`;
}

const DIM_FIELDS = Array.from({ length: HEADER_LIMITS.maxDims }, (_, d) => `dim ${d}`);
