/**
 * A worker's tensor compression (cluster.collective.tensor_compression): which
 * tensors are eligible, compressing a message's tensors into pooled buffers on
 * send, restoring them into their destinations on receive. One per worker,
 * shared by all its groups; the pool is created on first use.
 */
import type { TensorCompressionConfig } from '../../runtime/config/cluster-config.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { WireCodec } from '../header.ts';
import { type PooledBuffer, TensorBufferPool } from './buffer-pool.ts';
import { createCodec, type TensorCodec } from './codecs.ts';

/** One tensor of a message as it travels. */
export interface EncodedTensor {
  /** The tensor itself, or a uint8 view on its compressed bytes. */
  wire: Tensor;
  /** Set when compressed. */
  compressedBytes?: number;
  codec?: WireCodec;
  /** The pooled buffer under `wire`, leased until the send completes. */
  lease?: PooledBuffer;
}

export interface CompressionStats {
  compressed: number;
  raw: number;
  /** Raw bytes of the tensors sent compressed, and what they took on the wire. */
  rawBytes: number;
  wireBytes: number;
}

export class TensorCompressor {
  readonly config: TensorCompressionConfig;
  readonly codec: TensorCodec;
  readonly #poolBytes: number;
  #pool: TensorBufferPool | undefined;
  readonly #stats: CompressionStats = { compressed: 0, raw: 0, rawBytes: 0, wireBytes: 0 };

  constructor(config: TensorCompressionConfig, poolBytes: number, codec: TensorCodec = createCodec(config)) {
    this.config = config;
    this.codec = codec;
    this.#poolBytes = poolBytes;
  }

  get pool(): TensorBufferPool {
    this.#pool ??= new TensorBufferPool(this.#poolBytes);
    return this.#pool;
  }

  stats(): CompressionStats {
    return { ...this.#stats };
  }

  /** CPU tensors of an included dtype, at least min_bytes, within the codec's input limit. */
  isEligible(tensor: Tensor): boolean {
    const n = tensor.nbytes;
    return (
      tensor.device === 'cpu' &&
      !this.config.excludedDtypes.includes(tensor.dtype) &&
      n > 0 &&
      n >= this.config.minBytes &&
      n <= this.codec.maxInputBytes
    );
  }

  /**
   * Each tensor compressed if eligible, a buffer is free, the codec has a slot
   * and the result is smaller; raw otherwise. All are started at once, in order.
   */
  async encode(tensors: readonly Tensor[]): Promise<EncodedTensor[]> {
    const outcomes = await Promise.allSettled(tensors.map((t) => this.#encodeOne(t)));
    const failed = outcomes.find((o) => o.status === 'rejected');
    if (!failed) return outcomes.map((o) => (o as PromiseFulfilledResult<EncodedTensor>).value);
    for (const o of outcomes) if (o.status === 'fulfilled') o.value.lease?.release();
    throw new Error(`${this.codec.name} compression failed: ${(failed.reason as Error)?.message}`, {
      cause: failed.reason,
    });
  }

  async #encodeOne(tensor: Tensor): Promise<EncodedTensor> {
    if (!this.isEligible(tensor)) return this.#raw(tensor);
    const lease = this.pool.acquire(tensor.nbytes);
    if (!lease) return this.#raw(tensor);
    const pending = this.codec.tryCompress(tensor.bytes());
    if (!pending) {
      lease.release();
      return this.#raw(tensor);
    }
    let packed: Uint8Array;
    try {
      packed = await pending;
    } catch (error) {
      lease.release();
      throw error;
    }
    if (packed.length >= tensor.nbytes) {
      lease.discard();
      return this.#raw(tensor);
    }
    new Uint8Array(lease.buffer, 0, packed.length).set(packed);
    this.#stats.compressed++;
    this.#stats.rawBytes += tensor.nbytes;
    this.#stats.wireBytes += packed.length;
    return {
      wire: Tensor.fromBuffer(lease.buffer, 0, [packed.length], 'uint8'),
      compressedBytes: packed.length,
      codec: this.codec.name,
      lease,
    };
  }

  #raw(tensor: Tensor): EncodedTensor {
    this.#stats.raw++;
    return { wire: tensor };
  }

  /** Where a compressed tensor of `bytes` bytes is received: a pooled buffer when one is free. */
  receiveBuffer(bytes: number): { wire: Tensor; lease?: PooledBuffer } {
    const lease = this.pool.acquire(bytes);
    if (!lease) return { wire: Tensor.empty([bytes], 'uint8') };
    return { wire: Tensor.fromBuffer(lease.buffer, 0, [bytes], 'uint8'), lease };
  }

  /** Restores `compressed` into `dest` exactly; a size that does not match is an error naming `who`. */
  async decodeInto(dest: Tensor, compressed: Tensor, timeoutMs: number, who: string): Promise<void> {
    const bytes = await this.codec.decompress(compressed.bytes(), timeoutMs, who);
    if (bytes.length !== dest.nbytes) {
      throw new Error(
        `${who}: ${this.codec.name} restored ${bytes.length} bytes for ${dest.describe()} (${dest.nbytes} bytes); the data is corrupt`,
      );
    }
    dest.bytes().set(bytes);
  }
}
