/** The p2p message header (src/p2p/header.ts), decoded with the default limits a worker runs with. */
import { serialize } from 'node:v8';
import { P2PHeaderError } from '../../../src/p2p/errors.ts';
import {
  DEFAULT_HEADER_LIMITS,
  decodeHeader,
  encodeHeader,
  MessageKind,
  type TensorSpec,
} from '../../../src/p2p/header.ts';
import { DTYPES, itemSize } from '../../../src/tensor/dtype.ts';
import { FieldLayout } from '../fields.ts';
import { int, pick, type Rnd } from '../random.ts';
import type { DecoderTarget } from '../target.ts';

const TOTAL_BYTES_AT = 20;
/** Short skeletons too (3 bytes for null): a record read past the last one then runs off the end, not into a long skeleton. */
const SKELETONS = [null, 7, 'ok', { step: 3, parts: [{ '\u0000tensorcomm.tensor': 0 }] }];

function drawSpec(rnd: Rnd): TensorSpec {
  const dtype = pick(rnd, DTYPES);
  const shape = Array.from({ length: int(rnd, 4) }, () => int(rnd, 6));
  if (rnd() < 0.8) {
    const rawBytes = shape.reduce((a, b) => a * b, 1) * itemSize(dtype);
    // Only CPU tensors with bytes travel compressed, in chunks of 1..raw bytes.
    if (rawBytes > 0 && rnd() < 0.4)
      return { dtype, shape, device: 'cpu', chunkBytes: 1 + int(rnd, rawBytes) };
    return { dtype, shape, device: 'cpu' };
  }
  return { dtype, shape, device: `cuda:${int(rnd, 4)}` };
}

export const p2pHeader: DecoderTarget = {
  name: 'p2p header',
  ownError: P2PHeaderError,
  sample(rnd) {
    const specs = Array.from({ length: int(rnd, 4) }, () => drawSpec(rnd));
    const skeleton = serialize(pick(rnd, SKELETONS));
    const codec = specs.some((s) => s.chunkBytes !== undefined)
      ? pick(rnd, ['lz4', 'zstd'] as const)
      : undefined;
    const kind = rnd() < 0.5 ? MessageKind.message : MessageKind.broadcast;
    const bytes = encodeHeader(kind, int(rnd, 2 ** 32), specs, skeleton, codec);
    const limits = DEFAULT_HEADER_LIMITS;
    const layout = new FieldLayout(true)
      .u32('magic')
      .u8('version')
      .u8('kind')
      .u8('codec')
      .u8('reserved')
      .u32('seq')
      .u32('tensor count', limits.maxTensors)
      .u32('skeleton bytes')
      .u32('total bytes', limits.maxHeaderBytes);
    specs.forEach((spec, i) => {
      layout
        .u8(`tensor ${i} dtype`)
        .u8(`tensor ${i} device kind`)
        .u16(`tensor ${i} device index`)
        .u8(`tensor ${i} ndim`, limits.maxDims)
        .u8(`tensor ${i} compressed`)
        .u16(`tensor ${i} padding`)
        .f64(`tensor ${i} chunk bytes`, limits.maxMessageBytes);
      for (let d = 0; d < spec.shape.length; d++) layout.f64(`tensor ${i} size ${d}`, limits.maxMessageBytes);
    });
    return { bytes, fields: layout.fields };
  },
  decode: (bytes) => decodeHeader(bytes),
  reseal(bytes) {
    if (bytes.length < TOTAL_BYTES_AT + 4) return false;
    new DataView(bytes.buffer, bytes.byteOffset).setUint32(TOTAL_BYTES_AT, bytes.length, true);
    return true;
  },
};
