/**
 * Turns the chunks of received buckets back into named tensors, in stream
 * order. A tensor that fits in one bucket is a view on the bytes its entry
 * landed in (whether that is the caller's to keep is the receiver's choice of
 * buffer). A split tensor is assembled into memory of its own.
 */
import { Tensor } from '../tensor/tensor.ts';
import { WeightSyncError } from './errors.ts';
import { type BucketEntry, type BucketHeader, tensorBytes } from './header.ts';

interface OpenTensor {
  entry: BucketEntry;
  tensor: Tensor;
  received: number;
}

export class ChunkAssembler {
  #partial: OpenTensor | undefined;

  /** The tensors completed by this bucket, in order; `chunks` holds each entry's bytes. */
  *tensors(header: BucketHeader, chunks: readonly Uint8Array[]): Generator<[string, Tensor]> {
    for (const [i, e] of header.entries.entries()) {
      const total = tensorBytes(e.dtype, e.shape);
      const chunk = chunks[i];
      if (this.#partial !== undefined) {
        const done = this.#continue(this.#partial, e, chunk, header.index);
        if (done) yield [e.name, done];
        continue;
      }
      if (e.chunkStart !== 0) {
        throw new WeightSyncError(
          `bucket ${header.index}: '${e.name}' continues at byte ${e.chunkStart}, but no split tensor is open`,
        );
      }
      if (e.chunkBytes === total) {
        yield [e.name, Tensor.fromBuffer(chunk.buffer, chunk.byteOffset, e.shape, e.dtype)];
        continue;
      }
      const tensor = Tensor.empty(e.shape, e.dtype);
      tensor.bytes().set(chunk);
      this.#partial = { entry: e, tensor, received: e.chunkBytes };
    }
    if (header.last && this.#partial !== undefined) {
      const p = this.#partial;
      throw new WeightSyncError(
        `bucket ${header.index} ends the stream inside '${p.entry.name}' (${p.received} of ${p.tensor.nbytes} bytes received)`,
      );
    }
  }

  #continue(p: OpenTensor, e: BucketEntry, chunk: Uint8Array, bucket: number): Tensor | undefined {
    const same =
      e.name === p.entry.name && e.dtype === p.entry.dtype && e.shape.join() === p.entry.shape.join();
    if (!same || e.chunkStart !== p.received) {
      throw new WeightSyncError(
        `bucket ${bucket}: expected the piece of '${p.entry.name}' at byte ${p.received}, got '${e.name}' at byte ${e.chunkStart}`,
      );
    }
    p.tensor.bytes().set(chunk, p.received);
    p.received += e.chunkBytes;
    if (p.received < p.tensor.nbytes) return undefined;
    this.#partial = undefined;
    return p.tensor;
  }
}
