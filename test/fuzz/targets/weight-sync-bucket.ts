/** The weight-sync bucket header (src/weight-sync/header.ts), decoded for a 64 KiB bucket. */
import { DTYPES, itemSize } from '../../../src/tensor/dtype.ts';
import { WeightSyncHeaderError } from '../../../src/weight-sync/errors.ts';
import {
  alignUp,
  type BucketEntry,
  decodeBucketHeader,
  encodeBucketHeader,
  HEADER_LIMITS,
  tensorBytes,
  utf8Length,
} from '../../../src/weight-sync/header.ts';
import { FieldLayout } from '../fields.ts';
import { int, pick, type Rnd } from '../random.ts';
import type { DecoderTarget } from '../target.ts';

const MAX_PAYLOAD_BYTES = 1 << 16;

/** A whole tensor, or one piece of a split one, at `offset` in the payload. */
function drawEntry(rnd: Rnd, i: number, offset: number): BucketEntry {
  const dtype = pick(rnd, DTYPES);
  const shape = Array.from({ length: int(rnd, 4) }, () => 1 + int(rnd, 5));
  const item = itemSize(dtype);
  const numel = tensorBytes(dtype, shape) / item;
  const first = rnd() < 0.7 ? 0 : int(rnd, numel);
  const chunkBytes = item * (first === 0 ? numel : 1 + int(rnd, numel - first));
  const name = rnd() < 0.8 ? `layers.${i}.w` : `ü.${i}`;
  return { name, dtype, shape, offset, chunkStart: item * first, chunkBytes };
}

export const weightSyncBucket: DecoderTarget = {
  name: 'weight-sync bucket header',
  ownError: WeightSyncHeaderError,
  sample(rnd) {
    const entries: BucketEntry[] = [];
    let offset = 0;
    for (let i = int(rnd, 5); i > 0; i--) {
      const entry = drawEntry(rnd, i, offset);
      entries.push(entry);
      offset = alignUp(offset + entry.chunkBytes);
    }
    const bytes = encodeBucketHeader({
      index: int(rnd, 100),
      last: rnd() < 0.5,
      payloadBytes: offset,
      sync: 1 + int(rnd, 100),
      digest: int(rnd, 2 ** 32),
      unchangedSince: 0,
      views: rnd() < 0.5,
      entries,
    });
    const layout = new FieldLayout(true)
      .u32('magic')
      .u16('version')
      .u16('flags')
      .u32('bucket index')
      .u32('entry count', HEADER_LIMITS.maxEntries)
      .u32('payload bytes', MAX_PAYLOAD_BYTES)
      .u32('digest');
    entries.forEach((e, i) => {
      layout
        .u16(`entry ${i} name length`, HEADER_LIMITS.maxNameBytes)
        .skip(utf8Length(e.name))
        .u8(`entry ${i} dtype`)
        .u8(`entry ${i} ndim`, HEADER_LIMITS.maxDims);
      for (let d = 0; d < e.shape.length; d++)
        layout.u32(`entry ${i} dim ${d}`, HEADER_LIMITS.maxTensorBytes);
      layout
        .u32(`entry ${i} offset`, MAX_PAYLOAD_BYTES)
        .u32(`entry ${i} chunk start`, HEADER_LIMITS.maxTensorBytes)
        .u32(`entry ${i} chunk bytes`, MAX_PAYLOAD_BYTES);
    });
    return { bytes, fields: layout.fields };
  },
  decode: (bytes) => decodeBucketHeader(bytes, MAX_PAYLOAD_BYTES),
};
