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
import { assertCommTensor, describeValue, isCommTensor } from '../tensor/validate.ts';
import { alignUp, type BucketEntry, HEADER_LIMITS, utf8Length } from './header.ts';

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

function checkEntry(item: unknown, position: number, where: string): [string, Tensor] {
  if (!Array.isArray(item) || item.length !== 2) {
    throw new TypeError(
      `${entryAt(where, position)} must be a [name, Tensor] pair, got ${describeValue(item)}`,
    );
  }
  const [name, tensor] = item as [unknown, unknown];
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(
      `${entryAt(where, position)}: the name must be a non-empty string, got ${describeValue(name)}`,
    );
  }
  // A UTF-16 code unit is at most 3 UTF-8 bytes: only a long name needs encoding to be measured.
  if (name.length * 3 > HEADER_LIMITS.maxNameBytes && utf8Length(name) > HEADER_LIMITS.maxNameBytes) {
    throw new RangeError(
      `${entryAt(where, position)}: the name '${name.slice(0, 40)}…' is over ${HEADER_LIMITS.maxNameBytes} UTF-8 bytes`,
    );
  }
  if (!isCommTensor(tensor)) assertCommTensor(tensor, `${entryAt(where, position)} ('${name}')`);
  if (tensor.device !== 'cpu') {
    throw new TypeError(
      `${entryAt(where, position)} ('${name}'): tensor is on ${tensor.device}; the weight-sync engine moves host tensors`,
    );
  }
  if (tensor.shape.length > HEADER_LIMITS.maxDims) {
    throw new RangeError(
      `${entryAt(where, position)} ('${name}'): ${tensor.describe()} has more than ${HEADER_LIMITS.maxDims} dims`,
    );
  }
  return [name, tensor];
}

/** Spelled out only for a bad entry: checkEntry runs for every tensor of every sync. */
function entryAt(where: string, position: number): string {
  return `${where}: stream entry ${position}`;
}

const NO_BUCKETS: readonly PlannedBucket[] = Object.freeze([]);

/** Places tensors into buckets one by one; the buckets a tensor completes come back from `add`. */
class BucketPlanner {
  #index = 0;
  #used = 0;
  #chunks: PlannedChunk[] = [];

  constructor(readonly bucketBytes: number) {}

  add([name, tensor]: [string, Tensor]): readonly PlannedBucket[] {
    const { bucketBytes } = this;
    const total = tensor.nbytes;
    const elementBytes = itemSize(tensor.dtype);
    let closed: PlannedBucket[] | undefined;
    let start = 0;
    for (;;) {
      // bucketBytes is a multiple of PAYLOAD_ALIGN, so the aligned cursor never passes the end.
      const offset = alignUp(this.#used);
      const room = bucketBytes - offset;
      if (total - start <= room) {
        this.#place(name, tensor, offset, start, total - start);
        return closed ?? NO_BUCKETS;
      }
      if (total > bucketBytes) {
        const piece = room - (room % elementBytes);
        if (piece > 0) {
          this.#place(name, tensor, offset, start, piece);
          start += piece;
        }
      }
      (closed ??= []).push(this.close(false));
    }
  }

  close(last: boolean): PlannedBucket {
    const bucket = { index: this.#index++, last, payloadBytes: this.#used, chunks: this.#chunks };
    this.#used = 0;
    this.#chunks = [];
    return bucket;
  }

  #place(name: string, tensor: Tensor, offset: number, chunkStart: number, chunkBytes: number): void {
    const { dtype, shape } = tensor;
    this.#chunks.push({ name, tensor, dtype, shape, offset, chunkStart, chunkBytes });
    this.#used = offset + chunkBytes;
  }
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
  const planner = new BucketPlanner(bucketBytes);
  let position = 0;
  // A plain Iterable is walked without an await per tensor (for-await would take a turn for each).
  if (Symbol.asyncIterator in weights) {
    for await (const item of weights) {
      for (const bucket of planner.add(checkEntry(item, position++, where))) yield bucket;
    }
  } else {
    for (const item of weights) {
      for (const bucket of planner.add(checkEntry(item, position++, where))) yield bucket;
    }
  }
  yield planner.close(true);
}
