/** The header in front of every file-store value file (src/file-store/value-header.ts). */
import { crc32 } from 'node:zlib';
import { FileStoreCorruptError } from '../../../src/file-store/errors.ts';
import {
  decodeValueHeader,
  encodeValueHeader,
  MAX_HEADER_BYTES,
} from '../../../src/file-store/value-header.ts';
import { MAX_DIMS, MAX_KEY_BYTES, MAX_TAG_BYTES } from '../../../src/runtime/store-limits.ts';
import { DTYPES, itemSize } from '../../../src/tensor/dtype.ts';
import { FieldLayout } from '../fields.ts';
import { int, pick } from '../random.ts';
import type { DecoderTarget } from '../target.ts';

const HEADER_BYTES_AT = 16;
const CRC_AT = 36;
const FIXED_BYTES = 64;

/** Signs the header again over the length it now declares, as a writer that meant it would; false when it cannot. */
export function resign(bytes: Uint8Array): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < FIXED_BYTES) return false;
  const declared = view.getUint32(HEADER_BYTES_AT, true);
  if (declared < FIXED_BYTES || declared > bytes.length) return false;
  view.setUint32(CRC_AT, 0, true);
  view.setUint32(CRC_AT, crc32(bytes.subarray(0, declared)), true);
  return true;
}

export const fileStoreValueHeader: DecoderTarget = {
  name: 'file-store value header',
  ownError: FileStoreCorruptError,
  sample(rnd) {
    const shape = Array.from({ length: int(rnd, MAX_DIMS + 1) }, () => int(rnd, 4));
    const dtype = pick(rnd, DTYPES);
    const place = rnd();
    const key = Buffer.from(rnd() < 0.8 ? 'k'.repeat(1 + int(rnd, 16)) : 'ключ');
    const tag = Buffer.from('t'.repeat(int(rnd, 17)));
    const bytes = encodeValueHeader({
      dtype,
      shape,
      producerRank: int(rnd, 64),
      consumers: int(rnd, 8),
      nonce: int(rnd, 2 ** 32),
      counter: int(rnd, 2 ** 32),
      key,
      tag,
      payloadBytes: shape.reduce((a, b) => a * b, 1) * itemSize(dtype),
      arena: place < 0.3 ? { index: int(rnd, 4), offset: 64 * int(rnd, 1000) } : undefined,
      ipc: place > 0.7 ? { device: int(rnd, 8), offset: 0 } : undefined,
    });
    const layout = new FieldLayout(true)
      .u32('magic')
      .u16('version')
      .u8('kind')
      .u8('dtype')
      .u8('ndim', MAX_DIMS)
      .u8('reserved')
      .u16('key bytes', MAX_KEY_BYTES)
      .u16('tag bytes', MAX_TAG_BYTES)
      .u16('reserved')
      .u32('header bytes', MAX_HEADER_BYTES)
      .u32('producer rank')
      .u32('consumers')
      .u32('nonce')
      .u32('counter')
      .u32('crc')
      .u64('payload bytes')
      .u32('arena index or device')
      .u32('reserved')
      .u64('arena or device offset');
    for (let d = 0; d < shape.length; d++) layout.u64(`size ${d}`);
    return { bytes, fields: layout.fields };
  },
  decode: (bytes) =>
    decodeValueHeader(
      Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length),
      bytes.length,
      'fuzzed value file',
    ),
  reseal: resign,
};
