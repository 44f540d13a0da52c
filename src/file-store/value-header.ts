/**
 * The binary header in front of every value file (little-endian, version 2):
 *
 *   0  magic 'TCFS'        4  version u16      6  kind u8         7  dtype code u8
 *   8  ndim u8             9  reserved u8     10  key bytes u16  12  tag bytes u16
 *  14  reserved u16       16  header bytes u32 20  producer rank u32
 *  24  consumers u32      28  generation nonce u32  32  generation counter u32
 *  36  CRC-32 of the header with this field zeroed   40  payload bytes u64
 *  48  arena index u32    52  reserved u32    56  arena offset u64   (kind arena)
 *  48  CUDA device u32    52  reserved u32    56  offset in the allocation u64   (kind cudaIpc)
 *  64  shape: ndim × u64, then the key, then the tag, zero-padded to a multiple of 64
 *
 * A host value's payload follows the header in the file; an arena value's
 * payload lies in its producer's arena file (arenaFile in file-names.ts) at
 * the given offset, and the file holds the header alone. A GPU value stays in
 * its producer's device memory: the file holds the header and the 64-byte
 * cudaIpcMemHandle of the allocation, which consumers open.
 * The padding keeps the payload aligned for every dtype (and for a mapping).
 * Every field is bounds-checked before use, so a corrupt file is an error,
 * never a wrong tensor or an unbounded allocation.
 */
import { crc32 } from 'node:zlib';
import { MAX_DIMS, MAX_KEY_BYTES, MAX_TAG_BYTES } from '../runtime/store-limits.ts';
import { type DType, dtypeCode, dtypeFromCode, itemSize } from '../tensor/dtype.ts';
import { FileStoreCorruptError } from './errors.ts';

const MAGIC = 0x53464354; // 'TCFS' read as a little-endian u32
export const HEADER_VERSION = 2;
const FIXED_BYTES = 64;
/** Alignment of the header length and of arena offsets: enough for every dtype. */
export const ALIGN = 64;
/** Large enough for the biggest valid header (16 dims, longest key and tag). */
export const MAX_HEADER_BYTES = 1024;
const CRC_OFFSET = 36;
/**
 * The most payload a header may declare: what a JavaScript number counts
 * exactly. Nothing is allocated from a declared size; the reader first checks
 * the file (or arena) really holds that many bytes.
 */
export const MAX_PAYLOAD_BYTES = Number.MAX_SAFE_INTEGER;

/** Where the payload is. */
export const PayloadKind = {
  /** In the value file, after the header. */
  host: 1,
  /** In the producer's GPU memory: a 64-byte cudaIpcMemHandle follows the header. */
  cudaIpc: 2,
  /** In a region of the producer's shared arena file. */
  arena: 3,
} as const;

/** Where an arena value's payload lies: the producer's arena number and the byte offset in it. */
export interface ArenaRef {
  index: number;
  offset: number;
}

/** Bytes of the cudaIpcMemHandle_t after a cudaIpc header. */
export const IPC_HANDLE_BYTES = 64;

/** Where a GPU value lies: the producer's device, and the tensor's offset in the allocation the handle names. */
export interface IpcRef {
  device: number;
  offset: number;
}

export interface ValueHeader {
  kind: number;
  dtype: DType;
  shape: number[];
  producerRank: number;
  consumers: number;
  /** The producing store's random nonce (names its arena files too). */
  nonce: number;
  /** Names this publication in claim and finish file names. */
  generation: string;
  key: string;
  tag: string;
  headerBytes: number;
  payloadBytes: number;
  /** Set for kind arena. */
  arena: ArenaRef | undefined;
  /** Set for kind cudaIpc. */
  ipc: IpcRef | undefined;
  /** What the value file holds: the header, plus the payload (host), or the IPC handle (cudaIpc). */
  fileBytes: number;
}

export interface HeaderFields {
  dtype: DType;
  shape: readonly number[];
  producerRank: number;
  consumers: number;
  nonce: number;
  counter: number;
  key: Uint8Array;
  tag: Uint8Array;
  payloadBytes: number;
  arena?: ArenaRef;
  ipc?: IpcRef;
}

export function generationName(nonce: number, counter: number): string {
  return `${nonce.toString(16)}-${counter.toString(16)}`;
}

export function encodeValueHeader(fields: HeaderFields): Buffer {
  const ndim = fields.shape.length;
  const used = FIXED_BYTES + 8 * ndim + fields.key.length + fields.tag.length;
  const size = Math.ceil(used / ALIGN) * ALIGN;
  const header = Buffer.alloc(size);
  header.writeUInt32LE(MAGIC, 0);
  header.writeUInt16LE(HEADER_VERSION, 4);
  header[6] = fields.arena ? PayloadKind.arena : fields.ipc ? PayloadKind.cudaIpc : PayloadKind.host;
  header[7] = dtypeCode(fields.dtype);
  header[8] = ndim;
  header.writeUInt16LE(fields.key.length, 10);
  header.writeUInt16LE(fields.tag.length, 12);
  header.writeUInt32LE(size, 16);
  header.writeUInt32LE(fields.producerRank, 20);
  header.writeUInt32LE(fields.consumers, 24);
  header.writeUInt32LE(fields.nonce >>> 0, 28);
  header.writeUInt32LE(fields.counter >>> 0, 32);
  header.writeBigUInt64LE(BigInt(fields.payloadBytes), 40);
  const ref = fields.arena ? { first: fields.arena.index, second: fields.arena.offset } : undefined;
  const place = ref ?? (fields.ipc && { first: fields.ipc.device, second: fields.ipc.offset });
  if (place) {
    header.writeUInt32LE(place.first, 48);
    header.writeBigUInt64LE(BigInt(place.second), 56);
  }
  fields.shape.forEach((n, d) => {
    header.writeBigUInt64LE(BigInt(n), FIXED_BYTES + 8 * d);
  });
  header.set(fields.key, FIXED_BYTES + 8 * ndim);
  header.set(fields.tag, FIXED_BYTES + 8 * ndim + fields.key.length);
  header.writeUInt32LE(crc32(header), CRC_OFFSET);
  return header;
}

/**
 * Parses the header at the start of `bytes` (the first `length` bytes of the
 * file). `describe` names the key and file for error messages.
 */
export function decodeValueHeader(bytes: Buffer, fileLength: number, describe: string): ValueHeader {
  const fail = (what: string) => new FileStoreCorruptError(`${describe} is corrupt: ${what}`);
  // A caller's length past the buffer must not turn into a read out of range.
  const length = Math.min(fileLength, bytes.length);
  if (length < FIXED_BYTES) throw fail(`${length} bytes is shorter than the ${FIXED_BYTES}-byte header`);
  if (bytes.readUInt32LE(0) !== MAGIC) throw fail('bad magic (not a tensorcomm value file)');
  const version = bytes.readUInt16LE(4);
  if (version !== HEADER_VERSION) throw fail(`header version ${version}, expected ${HEADER_VERSION}`);
  const headerBytes = bytes.readUInt32LE(16);
  if (headerBytes % ALIGN !== 0 || headerBytes < FIXED_BYTES || headerBytes > MAX_HEADER_BYTES) {
    throw fail(
      `header length ${headerBytes} is not a multiple of ${ALIGN} in ${FIXED_BYTES}..${MAX_HEADER_BYTES}`,
    );
  }
  if (headerBytes > length) throw fail(`header of ${headerBytes} bytes is truncated to ${length}`);
  const stored = bytes.readUInt32LE(CRC_OFFSET);
  const header = Buffer.from(bytes.subarray(0, headerBytes));
  header.writeUInt32LE(0, CRC_OFFSET);
  if (crc32(header) !== stored) throw fail('header checksum mismatch');
  const kind = header[6];
  if (kind !== PayloadKind.host && kind !== PayloadKind.arena && kind !== PayloadKind.cudaIpc) {
    throw fail(`unknown payload kind ${kind}`);
  }
  let dtype: DType;
  try {
    dtype = dtypeFromCode(header[7]);
  } catch {
    throw fail(`unknown dtype code ${header[7]}`);
  }
  const ndim = header[8];
  const keyBytes = header.readUInt16LE(10);
  const tagBytes = header.readUInt16LE(12);
  if (ndim > MAX_DIMS) throw fail(`${ndim} dimensions, at most ${MAX_DIMS}`);
  if (keyBytes === 0 || keyBytes > MAX_KEY_BYTES) throw fail(`key length ${keyBytes}`);
  if (tagBytes > MAX_TAG_BYTES) throw fail(`tag length ${tagBytes}`);
  const keyStart = FIXED_BYTES + 8 * ndim;
  if (keyStart + keyBytes + tagBytes > headerBytes) throw fail('shape, key and tag overrun the header');
  const shape: number[] = [];
  // In BigInt: 16 dimensions of up to 2^53 each overflow a double to Infinity.
  let numel = 1n;
  for (let d = 0; d < ndim; d++) {
    const n = header.readBigUInt64LE(FIXED_BYTES + 8 * d);
    if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw fail(`dimension ${d} of size ${n}`);
    shape.push(Number(n));
    numel *= n;
  }
  const payload = header.readBigUInt64LE(40);
  const declared = numel * BigInt(itemSize(dtype));
  if (declared > BigInt(MAX_PAYLOAD_BYTES)) {
    throw fail(
      `${dtype}[${shape.join(',')}] is ${declared} bytes, more than the ${MAX_PAYLOAD_BYTES} a value may hold`,
    );
  }
  const expected = Number(declared);
  if (payload !== declared) {
    throw fail(`payload length ${payload} does not match ${dtype}[${shape.join(',')}] (${expected} bytes)`);
  }
  let arena: ArenaRef | undefined;
  let ipc: IpcRef | undefined;
  const offset = header.readBigUInt64LE(56);
  if (kind === PayloadKind.arena) {
    if (offset > BigInt(Number.MAX_SAFE_INTEGER) || offset % BigInt(ALIGN) !== 0n) {
      throw fail(`arena offset ${offset} is not a multiple of ${ALIGN} below 2^53`);
    }
    arena = { index: header.readUInt32LE(48), offset: Number(offset) };
  } else if (kind === PayloadKind.cudaIpc) {
    if (offset > BigInt(Number.MAX_SAFE_INTEGER) || offset % BigInt(itemSize(dtype)) !== 0n) {
      throw fail(`device offset ${offset} is not a multiple of the ${dtype} item size below 2^53`);
    }
    ipc = { device: header.readUInt32LE(48), offset: Number(offset) };
  }
  const nonce = header.readUInt32LE(28);
  return {
    kind,
    dtype,
    shape,
    producerRank: header.readUInt32LE(20),
    consumers: header.readUInt32LE(24),
    nonce,
    generation: generationName(nonce, header.readUInt32LE(32)),
    key: header.toString('utf8', keyStart, keyStart + keyBytes),
    tag: header.toString('utf8', keyStart + keyBytes, keyStart + keyBytes + tagBytes),
    headerBytes,
    payloadBytes: expected,
    arena,
    ipc,
    fileBytes: headerBytes + (arena ? 0 : ipc ? IPC_HANDLE_BYTES : expected),
  };
}
