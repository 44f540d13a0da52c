/**
 * The file store's value header decoder under malformed input: seeded random
 * fuzzing of headers that are valid, re-checksummed after a field is
 * overwritten (so the bounds checks behind the checksum are reached), flipped
 * without a new checksum, cut short, or claimed longer than they are. Every
 * outcome is a decoded header within bounds or a FileStoreCorruptError, never
 * a RangeError or other raw error, and a decoded header never declares more
 * than a value may hold (the reader then checks the file holds it before it
 * allocates anything).
 */
import { describe, expect, it } from 'vitest';
import { decodeValueHeader, encodeValueHeader, MAX_PAYLOAD_BYTES } from '../src/file-store/value-header.ts';
import { DTYPES, FileStoreCorruptError } from '../src/index.ts';
import { itemSize } from '../src/tensor/dtype.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';
import { resign } from './fuzz/targets/file-store-value-header.ts';

const int = (rnd: () => number, n: number) => Math.floor(rnd() * n);

function drawHeader(rnd: () => number): Buffer {
  const shape = Array.from({ length: int(rnd, 17) }, () => int(rnd, 4));
  const dtype = DTYPES[int(rnd, DTYPES.length)];
  const place = rnd();
  return encodeValueHeader({
    dtype,
    shape,
    producerRank: int(rnd, 64),
    consumers: int(rnd, 8),
    nonce: int(rnd, 2 ** 32),
    counter: int(rnd, 2 ** 32),
    key: Buffer.from('k'.repeat(1 + int(rnd, 128))),
    tag: Buffer.from('t'.repeat(int(rnd, 257))),
    payloadBytes: shape.reduce((a, b) => a * b, 1) * itemSize(dtype),
    arena: place < 0.3 ? { index: int(rnd, 4), offset: 64 * int(rnd, 1000) } : undefined,
    ipc: place > 0.7 ? { device: int(rnd, 8), offset: 0 } : undefined,
  });
}

/** Field offsets (value-header.ts) and widths a mutation overwrites. */
const FIELDS: Array<[offset: number, width: 1 | 2 | 4 | 8]> = [
  [4, 2],
  [6, 1],
  [7, 1],
  [8, 1],
  [10, 2],
  [12, 2],
  [16, 4],
  [40, 8],
  [48, 4],
  [56, 8],
];

/** A random value for a field: small, at an edge, or anything. */
function fieldValue(rnd: () => number, width: number): bigint {
  const max = 2n ** BigInt(8 * width) - 1n;
  const pick = rnd();
  if (pick < 0.3) return BigInt(int(rnd, 64));
  if (pick < 0.5) return max - BigInt(int(rnd, 3));
  if (pick < 0.6) return (2n ** 53n + BigInt(int(rnd, 3)) - 1n) & max;
  return (BigInt(Math.floor(rnd() * 2 ** 32)) * BigInt(Math.floor(rnd() * 2 ** 32))) & max;
}

function writeField(bytes: Buffer, offset: number, width: number, value: bigint): void {
  if (offset + width > bytes.length) return;
  if (width === 8) bytes.writeBigUInt64LE(value, offset);
  else bytes.writeUIntLE(Number(value), offset, width);
}

/** One malformed (or still valid) header and the file length the decoder is told. */
function mutate(rnd: () => number, header: Buffer): { bytes: Buffer; length: number } {
  const bytes = Buffer.from(header);
  const kind = int(rnd, 5);
  if (kind === 0 || kind === 1) {
    // Overwrite fields, including the shape's dimensions, and checksum it again.
    for (let n = 1 + int(rnd, 3); n > 0; n--) {
      const ndim = bytes[8];
      const dims = Array.from({ length: Math.min(ndim, 16) }, (_, d): [number, 8] => [64 + 8 * d, 8]);
      const [offset, width] = [...FIELDS, ...dims, ...dims][int(rnd, FIELDS.length + 2 * dims.length)];
      writeField(bytes, offset, width, fieldValue(rnd, width));
    }
    resign(bytes);
    return { bytes, length: bytes.length };
  }
  if (kind === 2) {
    for (let n = 1 + int(rnd, 4); n > 0; n--) bytes[int(rnd, bytes.length)] = int(rnd, 256);
    return { bytes, length: bytes.length };
  }
  if (kind === 3) return { bytes: bytes.subarray(0, int(rnd, bytes.length)), length: int(rnd, bytes.length) };
  // A caller that believes the file is longer than what it read.
  const cut = bytes.subarray(0, int(rnd, bytes.length));
  return { bytes: cut, length: bytes.length + int(rnd, 1 << 20) };
}

function expectCleanOutcome(bytes: Buffer, length: number): 'ok' | 'error' {
  try {
    const header = decodeValueHeader(bytes, length, 'fuzzed value file');
    const numel = header.shape.reduce((a, b) => a * BigInt(b), 1n);
    expect(BigInt(header.payloadBytes)).toBe(numel * BigInt(itemSize(header.dtype)));
    expect(header.payloadBytes).toBeLessThanOrEqual(MAX_PAYLOAD_BYTES);
    expect(header.shape.length).toBeLessThanOrEqual(16);
    expect(header.headerBytes).toBeLessThanOrEqual(Math.min(length, bytes.length));
    return 'ok';
  } catch (error) {
    if (!(error instanceof FileStoreCorruptError)) throw error;
    expect(error.message).toMatch(/^fuzzed value file is corrupt: /);
    return 'error';
  }
}

describe('file-store value header decoder', () => {
  it('20,000 seeded malformed headers: each decodes within bounds or is a FileStoreCorruptError', () => {
    const rnd = mulberry32(0x5eed_f11e);
    const seen = { ok: 0, error: 0 };
    for (let i = 0; i < 20_000; i++) {
      const { bytes, length } = mutate(rnd, drawHeader(rnd));
      try {
        seen[expectCleanOutcome(bytes, length)]++;
      } catch (error) {
        throw new Error(`case ${i} (${bytes.toString('hex')}, length ${length}): ${(error as Error).stack}`);
      }
    }
    // Both outcomes occur, so the fuzz reaches past the checks as well as into them.
    expect(seen.ok).toBeGreaterThan(500);
    expect(seen.error).toBeGreaterThan(10_000);
  });

  it('16 dimensions whose product overflows a double are a FileStoreCorruptError, not a RangeError', () => {
    const header = encodeValueHeader({
      dtype: 'float64',
      shape: new Array(16).fill(1),
      producerRank: 0,
      consumers: 1,
      nonce: 1,
      counter: 1,
      key: Buffer.from('k'),
      tag: new Uint8Array(),
      payloadBytes: 8,
    });
    for (let d = 0; d < 16; d++) header.writeBigUInt64LE(2n ** 53n - 1n, 64 + 8 * d);
    resign(header);
    expect(() => decodeValueHeader(header, header.length, 'v')).toThrow(FileStoreCorruptError);
    expect(() => decodeValueHeader(header, header.length, 'v')).toThrow(/more than the \d+ a value may hold/);
  });
});
