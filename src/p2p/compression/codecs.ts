/**
 * The lossless byte codecs behind tensor compression. lz4 (lz4-napi) is
 * stateless and unlimited; zstd (@mongodb-js/zstd) runs at most
 * `maxInflight` operations per worker. Both run on libuv's pool, so a rank's
 * event loop stays free while they work (docs/design.md decision 3).
 */

import { createRequire } from 'node:module';
import type { CompressionCodec, TensorCompressionConfig } from '../../runtime/config/cluster-config.ts';
import { P2PCompressionError } from '../errors.ts';
import { InflightLimit } from './inflight-limit.ts';

/**
 * The native addons load on a codec's first use, not on import: every rank thread imports this
 * module, and only ranks that compress should pay for (and hold) lz4's and zstd's addons.
 */
let lz4Module: Promise<typeof import('lz4-napi')> | undefined;
let zstdModule: Promise<typeof import('@mongodb-js/zstd')> | undefined;
/** Both are CommonJS: required, not imported, so this works the same in a script chunk (runtime/import-module.ts). */
const requirePackage = <T>(name: string) =>
  Promise.resolve().then(() => createRequire(import.meta.url)(name) as T);
const lz4 = () => (lz4Module ??= requirePackage('lz4-napi'));
const zstd = () => (zstdModule ??= requirePackage('@mongodb-js/zstd'));

export const CODEC_IDS: Readonly<Record<CompressionCodec, number>> = { lz4: 1, zstd: 2 };

export interface TensorCodec {
  readonly name: CompressionCodec;
  /** Larger inputs stay raw. */
  readonly maxInputBytes: number;
  /**
   * Takes up to `want` compression slots for one message, only those free now
   * (a sender never waits for one: with none it sends raw); returns how many
   * it took.
   */
  reserve(want: number): number;
  /** Gives back `count` slots taken by reserve. */
  unreserve(count: number): void;
  /** The compressed bytes; one call at a time per reserved slot. */
  compress(input: Uint8Array): Promise<Uint8Array>;
  /** Waits for a slot if needed (`who` names the waiter in a timeout). */
  decompress(input: Uint8Array, timeoutMs: number, who: string): Promise<Uint8Array>;
}

/** LZ4's LZ4_MAX_INPUT_SIZE; lz4-napi's size prefix is 32 bits as well. */
const LZ4_MAX_INPUT_BYTES = 0x7e000000;
/** Below Node's largest Buffer and the 4 GiB tensor ceiling alike. */
const ZSTD_MAX_INPUT_BYTES = 2 ** 32 - 1;

function bufferOver(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

class Lz4Codec implements TensorCodec {
  readonly name = 'lz4';
  readonly maxInputBytes = LZ4_MAX_INPUT_BYTES;

  reserve(want: number): number {
    return want;
  }

  unreserve(): void {}

  async compress(input: Uint8Array): Promise<Uint8Array> {
    return (await lz4()).compress(bufferOver(input));
  }

  async decompress(input: Uint8Array): Promise<Uint8Array> {
    return (await lz4()).uncompress(input);
  }
}

class ZstdCodec implements TensorCodec {
  readonly name = 'zstd';
  readonly maxInputBytes = ZSTD_MAX_INPUT_BYTES;
  readonly #level: number;
  readonly slots: InflightLimit;

  constructor(level: number, maxInflight: number) {
    this.#level = level;
    this.slots = new InflightLimit(maxInflight);
  }

  /** At most half the slots (one at least): other channels' messages and decompressions keep the rest. */
  reserve(want: number): number {
    const most = Math.min(want, Math.max(1, Math.floor(this.slots.limit / 2)));
    let taken = 0;
    while (taken < most && this.slots.tryAcquire()) taken++;
    return taken;
  }

  unreserve(count: number): void {
    for (let i = 0; i < count; i++) this.slots.release();
  }

  async compress(input: Uint8Array): Promise<Uint8Array> {
    return (await zstd()).compress(bufferOver(input), this.#level);
  }

  async decompress(input: Uint8Array, timeoutMs: number, who: string): Promise<Uint8Array> {
    await this.slots.acquire(timeoutMs, who);
    try {
      return await (await zstd()).decompress(bufferOver(input));
    } finally {
      this.slots.release();
    }
  }
}

export function createCodec(config: TensorCompressionConfig): TensorCodec {
  return config.codec === 'lz4' ? new Lz4Codec() : new ZstdCodec(config.level, config.maxInflight);
}

/**
 * A tiny round trip, so a missing native module or a broken codec fails when
 * a worker loads its config instead of in the middle of a job.
 */
export async function probeCodec(codec: TensorCodec, who: string): Promise<void> {
  const sample = new Uint8Array(256).map((_, i) => (i % 7 === 0 ? i : 0));
  try {
    // These two are only words for the probe's error below.
    if (codec.reserve(1) === 0) throw new Error('no free slot');
    let packed: Uint8Array;
    try {
      packed = await codec.compress(sample);
    } finally {
      codec.unreserve(1);
    }
    const back = await codec.decompress(packed, 60_000, who);
    if (back.length !== sample.length || back.some((b, i) => b !== sample[i])) {
      throw new Error('the round trip changed the bytes');
    }
  } catch (error) {
    throw new P2PCompressionError(
      `${who}: codec ${codec.name} failed its startup probe: ${(error as Error).message}`,
      { cause: error },
    );
  }
}
