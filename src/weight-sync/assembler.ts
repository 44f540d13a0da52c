/**
 * Turns the chunks of received buckets back into named tensors, in stream
 * order. A tensor that fits in one bucket is a view on the bytes its entry
 * landed in (whether that is the caller's to keep is the receiver's choice of
 * buffer). A split tensor is assembled into memory of its own.
 *
 * Given a landing in the caller's `into` (into.ts), a tensor is the target
 * itself: each piece is copied there unless it landed there already.
 *
 * In delta mode a bucket may be skipped (delta.ts): its tensors are not
 * yielded, and neither is a split tensor with a piece in it: the sender
 * skips a bucket only when every tensor with a piece there is unchanged, so
 * the caller still holds that tensor whole, whichever of its pieces came.
 */
import { Tensor } from '../tensor/tensor.ts';
import { WeightSyncError } from './errors.ts';
import { type BucketEntry, type BucketHeader, tensorBytes } from './header.ts';
import type { Landing } from './into.ts';

interface OpenTensor {
  entry: BucketEntry;
  /** Undefined once a piece was skipped: the tensor will not be yielded. */
  tensor: Tensor | undefined;
  total: number;
  received: number;
}

export class ChunkAssembler {
  /** Whether a tensor yielded from its bucket's memory is copied out of it (the bucket is reused). */
  readonly #copyViews: boolean;
  #partial: OpenTensor | undefined;

  constructor(copyViews: boolean) {
    this.#copyViews = copyViews;
  }

  /**
   * The tensors completed by this bucket, in order; `chunks` holds each entry's bytes, `landings` (aligned
   * with the entries) where the caller's `into` takes them.
   */
  *tensors(
    header: BucketHeader,
    chunks: readonly Uint8Array[],
    landings: ReadonlyArray<Landing | undefined> = [],
  ): Generator<[string, Tensor]> {
    for (const [i, e] of header.entries.entries()) {
      const landing = landings[i];
      const chunk = chunks[i];
      if (landing && chunk !== landing.bytes) landing.bytes.set(chunk);
      const piece = landing ? undefined : chunk;
      if (this.#partial !== undefined) {
        const done = this.#continue(this.#partial, e, piece, header.index);
        if (done) yield [e.name, done];
        continue;
      }
      const total = this.#start(e, header.index);
      if (e.chunkBytes === total) {
        yield [e.name, landing?.target ?? this.#view(chunk, e)];
        continue;
      }
      const tensor = landing?.target ?? Tensor.empty(e.shape, e.dtype);
      if (piece) tensor.bytes().set(piece);
      this.#partial = { entry: e, tensor, total, received: e.chunkBytes };
    }
    this.#checkEnd(header);
  }

  #view(chunk: Uint8Array, e: BucketEntry): Tensor {
    const view = Tensor.fromBuffer(chunk.buffer, chunk.byteOffset, e.shape, e.dtype);
    return this.#copyViews ? view.clone() : view;
  }

  /** A bucket skipped in delta mode: its entries are followed, and no tensor with a piece in it is yielded. */
  skip(header: BucketHeader): void {
    for (const e of header.entries) {
      if (this.#partial !== undefined) {
        this.#partial.tensor = undefined;
        this.#continue(this.#partial, e, undefined, header.index);
        continue;
      }
      const total = this.#start(e, header.index);
      if (e.chunkBytes !== total)
        this.#partial = { entry: e, tensor: undefined, total, received: e.chunkBytes };
    }
    this.#checkEnd(header);
  }

  /** The bytes of the tensor that entry `e` starts (no split tensor is open). */
  #start(e: BucketEntry, bucket: number): number {
    if (e.chunkStart !== 0) {
      throw new WeightSyncError(
        `bucket ${bucket}: '${e.name}' continues at byte ${e.chunkStart}, but no split tensor is open`,
      );
    }
    return tensorBytes(e.dtype, e.shape);
  }

  #checkEnd(header: BucketHeader): void {
    const p = this.#partial;
    if (!header.last || p === undefined) return;
    throw new WeightSyncError(
      `bucket ${header.index} ends the stream inside '${p.entry.name}' (${p.received} of ${p.total} bytes received)`,
    );
  }

  /** The next piece of `p` (`chunk` undefined: skipped, or already in place); the tensor once complete, if none was skipped. */
  #continue(
    p: OpenTensor,
    e: BucketEntry,
    chunk: Uint8Array | undefined,
    bucket: number,
  ): Tensor | undefined {
    const same =
      e.name === p.entry.name && e.dtype === p.entry.dtype && e.shape.join() === p.entry.shape.join();
    if (!same || e.chunkStart !== p.received) {
      throw new WeightSyncError(
        `bucket ${bucket}: expected the piece of '${p.entry.name}' at byte ${p.received}, got '${e.name}' at byte ${e.chunkStart}`,
      );
    }
    if (chunk) p.tensor?.bytes().set(chunk, p.received);
    p.received += e.chunkBytes;
    if (p.received < p.total) return undefined;
    this.#partial = undefined;
    return p.tensor;
  }
}
