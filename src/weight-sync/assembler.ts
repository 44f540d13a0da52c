/**
 * Turns the chunks of received buckets back into named tensors, in stream
 * order. A tensor that fits in one bucket is a view on the bytes its entry
 * landed in (whether that is the caller's to keep is the receiver's choice of
 * buffer). A split tensor is assembled into memory of its own.
 *
 * In delta mode a bucket may be skipped (delta.ts): its tensors are not
 * yielded, and neither is a split tensor with a piece in it: the sender
 * skips a bucket only when every tensor with a piece there is unchanged, so
 * the caller still holds that tensor whole, whichever of its pieces came.
 */
import { Tensor } from '../tensor/tensor.ts';
import { WeightSyncError } from './errors.ts';
import { type BucketEntry, type BucketHeader, tensorBytes } from './header.ts';

interface OpenTensor {
  entry: BucketEntry;
  /** Undefined once a piece was skipped: the tensor will not be yielded. */
  tensor: Tensor | undefined;
  total: number;
  received: number;
}

export class ChunkAssembler {
  #partial: OpenTensor | undefined;

  /** The tensors completed by this bucket, in order; `chunks` holds each entry's bytes. */
  *tensors(header: BucketHeader, chunks: readonly Uint8Array[]): Generator<[string, Tensor]> {
    for (const [i, e] of header.entries.entries()) {
      const chunk = chunks[i];
      if (this.#partial !== undefined) {
        const done = this.#continue(this.#partial, e, chunk, header.index);
        if (done) yield [e.name, done];
        continue;
      }
      const total = this.#start(e, header.index);
      if (e.chunkBytes === total) {
        yield [e.name, Tensor.fromBuffer(chunk.buffer, chunk.byteOffset, e.shape, e.dtype)];
        continue;
      }
      const tensor = Tensor.empty(e.shape, e.dtype);
      tensor.bytes().set(chunk);
      this.#partial = { entry: e, tensor, total, received: e.chunkBytes };
    }
    this.#checkEnd(header);
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

  /** The next piece of `p` (`chunk` undefined: skipped); the tensor once complete, if none was skipped. */
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
