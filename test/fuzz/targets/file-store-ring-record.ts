/** The records rank pairs of one node exchange through their rings (src/file-store/ring-records.ts). */
import { FileStoreCorruptError } from '../../../src/file-store/errors.ts';
import {
  decodeRecord,
  finishedRecord,
  type PayloadAt,
  valueRecord,
  withdrawRecord,
} from '../../../src/file-store/ring-records.ts';
import {
  MAX_DIMS,
  MAX_ERROR_BYTES,
  MAX_KEY_BYTES,
  MAX_TAG_BYTES,
} from '../../../src/runtime/store-limits.ts';
import { DTYPES } from '../../../src/tensor/dtype.ts';
import { Tensor } from '../../../src/tensor/tensor.ts';
import { FieldLayout } from '../fields.ts';
import type { Sample } from '../mutants.ts';
import { int, pick, type Rnd } from '../random.ts';
import type { DecoderTarget } from '../target.ts';

const encoder = new TextEncoder();
const ERRORS = ['', 'boom', 'shape mismatch: «float32[2]» vs «float32[3]»'];

function drawPayload(rnd: Rnd): PayloadAt {
  switch (int(rnd, 4)) {
    case 0:
      return { at: 'inline' };
    case 1:
      return {
        at: 'arena',
        ref: { index: int(rnd, 4), offset: 64 * int(rnd, 1000) },
        nonce: int(rnd, 2 ** 32),
      };
    case 2:
      return { at: 'file' };
    default:
      return { at: 'remote', pid: 1 + int(rnd, 1e5), address: 4096 * (1 + int(rnd, 1e6)) };
  }
}

function valueSample(rnd: Rnd, id: number): Sample {
  const tensor = Tensor.zeros(
    Array.from({ length: int(rnd, 4) }, () => int(rnd, 5)),
    pick(rnd, DTYPES),
  );
  const key = encoder.encode(rnd() < 0.8 ? `grad/${int(rnd, 100)}` : 'ключ');
  const tag = encoder.encode(rnd() < 0.5 ? '' : 'allReduce#3');
  const payload = drawPayload(rnd);
  const bytes = Buffer.concat(valueRecord(id, key, tag, tensor, payload));
  const layout = new FieldLayout(true)
    .u8('record type')
    .u32('id')
    .u8('dtype')
    .u8('dims', MAX_DIMS)
    .u16('key bytes', MAX_KEY_BYTES)
    .u16('tag bytes', MAX_TAG_BYTES);
  for (let d = 0; d < tensor.shape.length; d++) layout.f64(`size ${d}`);
  layout.skip(key.length + tag.length);
  if (payload.at === 'arena') layout.u32('arena index').u32('nonce').f64('arena offset');
  if (payload.at === 'remote') layout.u32('pid').f64('address');
  return { bytes, fields: layout.fields };
}

export const fileStoreRingRecord: DecoderTarget = {
  name: 'file-store ring record',
  ownError: FileStoreCorruptError,
  sample(rnd) {
    const id = int(rnd, 2 ** 32);
    const kind = rnd();
    if (kind < 0.6) return valueSample(rnd, id);
    if (kind < 0.9) {
      const error = pick(rnd, ERRORS);
      const bytes = finishedRecord(id, error === '' ? {} : { error, mismatch: rnd() < 0.5 });
      const layout = new FieldLayout(true)
        .u8('record type')
        .u32('id')
        .u8('outcome')
        .u16('error bytes', MAX_ERROR_BYTES);
      return { bytes, fields: layout.fields };
    }
    return { bytes: withdrawRecord(id), fields: new FieldLayout(true).u8('record type').u32('id').fields };
  },
  decode: (bytes) => decodeRecord(bytes),
};
