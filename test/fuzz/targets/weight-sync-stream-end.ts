/** The record that closes a weight-sync sender's header stream (src/weight-sync/stream-end.ts). */
import { WeightSyncHeaderError } from '../../../src/weight-sync/errors.ts';
import { decodeStreamEnd, encodeStreamEnd } from '../../../src/weight-sync/stream-end.ts';
import { FieldLayout } from '../fields.ts';
import { int, pick } from '../random.ts';
import type { DecoderTarget } from '../target.ts';

/** The longest message a stream end carries (stream-end.ts cuts longer ones). */
const MAX_MESSAGE_BYTES = 4096;
const MESSAGES = ['', 'rank 3 failed: out of memory', 'tensor «w» has a NaN', 'x'.repeat(300)];

export const weightSyncStreamEnd: DecoderTarget = {
  name: 'weight-sync stream end',
  ownError: WeightSyncHeaderError,
  sample(rnd) {
    const bytes =
      rnd() < 0.5
        ? encodeStreamEnd({
            failed: false,
            buckets: int(rnd, 1000),
            tensors: int(rnd, 1e5),
            digest: int(rnd, 2 ** 32),
          })
        : encodeStreamEnd({ failed: true, error: pick(rnd, MESSAGES) });
    const layout = new FieldLayout(true)
      .u32('magic')
      .u16('version')
      .u16('flags')
      .u32('buckets')
      .u32('tensors')
      .u32('digest')
      .u32('message length', MAX_MESSAGE_BYTES);
    return { bytes, fields: layout.fields };
  },
  decode: (bytes) => decodeStreamEnd(bytes),
};
