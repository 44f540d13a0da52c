/**
 * A worker's tensor compression (cluster.collective.tensor_compression): which
 * tensors are eligible, compressing an eligible tensor chunk by chunk into a
 * pooled buffer on send (so the wire, the codec and the receiver overlap), and
 * restoring each chunk into its destination on receive. One per worker, shared
 * by all its groups; the pool is created on first use.
 */
import type { TensorCompressionConfig } from '../../runtime/config/cluster-config.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { P2PCompressionError, P2PProtocolError } from '../errors.ts';
import { chunkCount, chunkOf } from '../header.ts';
import { type PooledBuffer, TensorBufferPool } from './buffer-pool.ts';
import { createCodec, type TensorCodec } from './codecs.ts';

/** Raw bytes per chunk: small enough that the wire, the codec and the receiver overlap, large enough that per-chunk costs vanish. */
export const CHUNK_BYTES = 2 ** 20;
/** Chunks a sender compresses ahead of the one going on the wire (libuv's pool has four threads). */
const COMPRESS_AHEAD = 4;
/** After this many chunks in a row that did not shrink, the rest of the tensor goes raw untried. */
const GIVE_UP_AFTER = 2;

/**
 * An eligible tensor on its way out in chunks: chunk k covers raw bytes
 * [k·chunkBytes, (k+1)·chunkBytes) and, when compressed, lands at that same
 * offset of the leased buffer (a compressed chunk is smaller than its raw one),
 * so the lease is the tensor's size and chunks never overlap.
 */
export interface ChunkedTensor {
  tensor: Tensor;
  chunkBytes: number;
  count: number;
  lease: PooledBuffer;
  /** Set by `chunks` once any chunk went compressed. */
  compressedAny: boolean;
}

export interface CompressionStats {
  /** Tensors sent with at least one chunk compressed, and tensors sent raw. */
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

  /** How `tensor` travels: in compressed chunks, or raw (undefined: ineligible, or no buffer free in the pool). */
  plan(tensor: Tensor): ChunkedTensor | undefined {
    const lease = this.isEligible(tensor) ? this.pool.acquire(tensor.nbytes) : undefined;
    if (!lease) {
      this.#stats.raw++;
      return undefined;
    }
    const chunkBytes = Math.min(CHUNK_BYTES, tensor.nbytes);
    return { tensor, chunkBytes, count: chunkCount(tensor.nbytes, chunkBytes), lease, compressedAny: false };
  }

  /**
   * The wire form of each chunk, in order, compressed up to COMPRESS_AHEAD
   * chunks ahead of the caller: compressed bytes in the lease, or a view on the
   * raw chunk when the codec had no free slot, the result would not be
   * smaller, or the codec failed (the receiver tells the two apart by size, and
   * nothing is lost). The caller keeps the plan's lease until every chunk's
   * send completed, then calls `finish`.
   */
  async *chunks(plan: ChunkedTensor): AsyncGenerator<Tensor> {
    const { chunkBytes, count, lease } = plan;
    const bytes = plan.tensor.bytes();
    // A sender never waits for a zstd slot: with none free the tensor goes raw, chunk by chunk.
    const slots = this.codec.reserve(COMPRESS_AHEAD);
    const ahead = Math.max(slots, 1);
    const started: Array<Promise<Uint8Array | undefined>> = [];
    let misses = 0;
    const start = (k: number) => {
      const input = chunkOf(bytes, chunkBytes, k);
      started[k] =
        slots === 0 || misses >= GIVE_UP_AFTER
          ? Promise.resolve(undefined)
          : this.codec.compress(input).then(
              (packed) => (packed.length < input.length ? packed : undefined),
              () => undefined,
            );
    };
    let wireBytes = 0;
    try {
      for (let k = 0; k < Math.min(ahead, count); k++) start(k);
      for (let k = 0; k < count; k++) {
        const packed = await started[k];
        misses = packed ? 0 : misses + 1;
        if (k + ahead < count) start(k + ahead);
        const offset = k * chunkBytes;
        let wire: Tensor;
        if (packed) {
          new Uint8Array(lease.buffer, offset, packed.length).set(packed);
          wire = Tensor.fromBuffer(lease.buffer, offset, [packed.length], 'uint8');
          plan.compressedAny = true;
        } else {
          const raw = chunkOf(bytes, chunkBytes, k);
          wire = Tensor.fromBuffer(raw.buffer, raw.byteOffset, [raw.length], 'uint8');
        }
        wireBytes += wire.nbytes;
        yield wire;
      }
    } finally {
      await Promise.all(started);
      this.codec.unreserve(slots);
    }
    if (plan.compressedAny) {
      this.#stats.compressed++;
      this.#stats.rawBytes += bytes.length;
      this.#stats.wireBytes += wireBytes;
    } else {
      this.#stats.raw++;
    }
  }

  /** Gives a plan's buffer back once its sends completed: cached for reuse, or dropped when nothing in it was compressed. */
  finish(plan: ChunkedTensor): void {
    if (plan.compressedAny) plan.lease.release();
    else plan.lease.discard();
  }

  /**
   * Restores chunk `k` of a tensor sent in chunks of `chunkBytes` into `dest`:
   * a wire chunk of the raw chunk's size is raw, a shorter one compressed. Any
   * other size, or a chunk that does not restore to its raw size, is an error
   * naming `who`.
   */
  async restoreChunk(
    dest: Tensor,
    chunkBytes: number,
    k: number,
    wire: Tensor,
    timeoutMs: number,
    who: string,
  ): Promise<void> {
    const raw = chunkOf(dest.bytes(), chunkBytes, k);
    const where = `${who}: chunk ${k} of ${dest.describe()}`;
    if (wire.dtype !== 'uint8' || wire.nbytes < 1 || wire.nbytes > raw.length) {
      throw new P2PProtocolError(
        `${where} arrived as ${wire.describe()}; expected 1..${raw.length} bytes (the two ends are out of step)`,
      );
    }
    if (wire.nbytes === raw.length) {
      raw.set(wire.bytes());
      return;
    }
    const restored = await this.codec.decompress(wire.bytes(), timeoutMs, who);
    if (restored.length !== raw.length) {
      throw new P2PCompressionError(
        `${where}: ${this.codec.name} restored ${restored.length} bytes, not ${raw.length}; the data is corrupt`,
      );
    }
    raw.set(restored);
  }
}
