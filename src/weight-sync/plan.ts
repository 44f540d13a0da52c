/**
 * Bucket planning: the one rule every sender applies to the weight stream, so
 * that all senders agree on bucket boundaries without talking to each other.
 *
 * Tensors go in stream order, each at the next multiple of PAYLOAD_ALIGN
 * (a float32 after an odd-sized bfloat16 still lands 4-aligned). A tensor
 * that does not fit in what is left of the bucket starts the next bucket; a
 * tensor larger than a whole bucket is split instead: its first piece fills
 * the current bucket, then whole buckets, and its last piece shares a bucket
 * with what follows. Pieces end on element boundaries.
 */
import { itemSize } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { assertCommTensor, describeValue } from '../tensor/validate.ts';
import { alignUp, type BucketEntry, HEADER_LIMITS } from './header.ts';

export type WeightStream = Iterable<readonly [string, Tensor]> | AsyncIterable<readonly [string, Tensor]>;

export interface PlannedChunk extends BucketEntry {
  tensor: Tensor;
}

export interface PlannedBucket {
  index: number;
  last: boolean;
  payloadBytes: number;
  chunks: PlannedChunk[];
}

const encoder = new TextEncoder();

function checkEntry(item: unknown, position: number, where: string): [string, Tensor] {
  const at = `${where}: stream entry ${position}`;
  if (!Array.isArray(item) || item.length !== 2) {
    throw new TypeError(`${at} must be a [name, Tensor] pair, got ${describeValue(item)}`);
  }
  const [name, tensor] = item as [unknown, unknown];
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(`${at}: the name must be a non-empty string, got ${describeValue(name)}`);
  }
  if (encoder.encode(name).length > HEADER_LIMITS.maxNameBytes) {
    throw new RangeError(
      `${at}: the name '${name.slice(0, 40)}…' is over ${HEADER_LIMITS.maxNameBytes} UTF-8 bytes`,
    );
  }
  assertCommTensor(tensor, `${at} ('${name}')`);
  if (tensor.device !== 'cpu') {
    throw new TypeError(
      `${at} ('${name}'): tensor is on ${tensor.device}; the weight-sync engine moves host tensors`,
    );
  }
  if (tensor.shape.length > HEADER_LIMITS.maxDims) {
    throw new RangeError(
      `${at} ('${name}'): ${tensor.describe()} has more than ${HEADER_LIMITS.maxDims} dims`,
    );
  }
  return [name, tensor];
}

export async function* planBuckets(
  weights: WeightStream,
  bucketBytes: number,
  where: string,
): AsyncGenerator<PlannedBucket> {
  if (
    weights === null ||
    typeof weights !== 'object' ||
    !(Symbol.asyncIterator in weights || Symbol.iterator in weights)
  ) {
    throw new TypeError(
      `${where}: weights must be an Iterable or AsyncIterable of [name, Tensor], got ${describeValue(weights)}`,
    );
  }
  let index = 0;
  let used = 0;
  let chunks: PlannedChunk[] = [];
  const close = (last: boolean): PlannedBucket => {
    const bucket = { index: index++, last, payloadBytes: used, chunks };
    used = 0;
    chunks = [];
    return bucket;
  };
  let position = 0;
  for await (const item of weights) {
    const [name, tensor] = checkEntry(item, position++, where);
    const total = tensor.nbytes;
    const elementBytes = itemSize(tensor.dtype);
    const place = (offset: number, chunkStart: number, chunkBytes: number) => {
      chunks.push({ name, tensor, dtype: tensor.dtype, shape: tensor.shape, offset, chunkStart, chunkBytes });
      used = offset + chunkBytes;
    };
    let start = 0;
    for (;;) {
      // bucketBytes is a multiple of PAYLOAD_ALIGN, so the aligned cursor never passes the end.
      const offset = alignUp(used);
      const room = bucketBytes - offset;
      if (total - start <= room) {
        place(offset, start, total - start);
        break;
      }
      if (total > bucketBytes) {
        const piece = room - (room % elementBytes);
        if (piece > 0) {
          place(offset, start, piece);
          start += piece;
        }
      }
      yield close(false);
    }
  }
  yield close(true);
}
