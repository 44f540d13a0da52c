/** The network store's frames after the handshake (src/network-store/wire.ts), decoded for a 1 MiB value limit. */
import { NetworkStoreFrameError } from '../../../src/network-store/errors.ts';
import {
  decodeFrame,
  fatalFrame,
  finishedFrame,
  MAX_STATUS_BYTES,
  statusHeaderFrame,
  valueHeaderFrame,
  wantFrame,
  withdrawFrame,
} from '../../../src/network-store/wire.ts';
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

const MAX_VALUE_BYTES = 1 << 20;
/** A frame's u32 length prefix: decodeFrame reads the body after it. */
const PREFIX_BYTES = 4;
const encoder = new TextEncoder();

/** The body of `frame` and the layout of its fields, starting with the type byte. */
function body(frame: Buffer, describe: (layout: FieldLayout) => void): Sample {
  const layout = new FieldLayout(false).u8('frame type');
  describe(layout);
  return { bytes: frame.subarray(PREFIX_BYTES), fields: layout.fields };
}

function valueSample(rnd: Rnd): Sample {
  const tensor = Tensor.zeros(
    Array.from({ length: int(rnd, 4) }, () => int(rnd, 6)),
    pick(rnd, DTYPES),
  );
  const key = rnd() < 0.8 ? `w/${int(rnd, 1000)}` : 'ключ';
  const tag = encoder.encode(rnd() < 0.5 ? '' : 'tag');
  return body(valueHeaderFrame(int(rnd, 1e6), key, tag, tensor), (layout) => {
    layout.u32('id').u16('key length', MAX_KEY_BYTES).skip(Buffer.byteLength(key));
    layout.u32('tag length', MAX_TAG_BYTES).skip(tag.length).u8('dtype').u8('ndim', MAX_DIMS);
    for (let d = 0; d < tensor.shape.length; d++) layout.f64(`size ${d}`, MAX_VALUE_BYTES);
    layout.f64('payload bytes', MAX_VALUE_BYTES);
  });
}

export const networkStoreFrame: DecoderTarget = {
  name: 'network-store frame',
  ownError: NetworkStoreFrameError,
  sample(rnd) {
    const key = `k${int(rnd, 1000)}`;
    switch (int(rnd, 6)) {
      case 0:
        return valueSample(rnd);
      case 1: {
        const error = rnd() < 0.5 ? undefined : pick(rnd, ['boom', 'dtype «int8» ≠ float32']);
        const frame = finishedFrame(
          int(rnd, 1e6),
          error === undefined ? {} : { error, mismatch: rnd() < 0.5 },
        );
        return body(frame, (layout) => layout.u32('id').u8('outcome').u32('error length', MAX_ERROR_BYTES));
      }
      case 2:
        return body(statusHeaderFrame(int(rnd, MAX_STATUS_BYTES)), (layout) =>
          layout.u32('status bytes', MAX_STATUS_BYTES),
        );
      case 3:
        return body(wantFrame(key), (layout) => layout.u16('key length', MAX_KEY_BYTES));
      case 4:
        return body(withdrawFrame(int(rnd, 1e6)), (layout) => layout.u32('id'));
      default:
        return body(fatalFrame('going away'), (layout) => layout.u32('text length'));
    }
  },
  decode: (bytes) => decodeFrame(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length), MAX_VALUE_BYTES),
};
