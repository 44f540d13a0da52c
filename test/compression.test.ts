/** Tensor compression at unit level: eligibility, round trips, raw fallbacks, zstd saturation, the GPU seam, header checks, the probe. */
import { serialize } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { DTYPES, type DType, loadClusterConfig, P2PHeaderError, Tensor } from '../src/index.ts';
import { probeCodec, type TensorCodec } from '../src/p2p/compression/codecs.ts';
import { TensorCompressor } from '../src/p2p/compression/tensor-compressor.ts';
import { decodeHeader, encodeHeader, MessageKind } from '../src/p2p/header.ts';
import type { TensorCompressionConfig } from '../src/runtime/config/cluster-config.ts';

function compressor(extra: Record<string, unknown>, poolBytes = 1 << 26): TensorCompressor {
  const config = loadClusterConfig({ cluster: { collective: { tensor_compression: extra } } });
  return new TensorCompressor(config.collective.tensorCompression as TensorCompressionConfig, poolBytes);
}

/** Mostly zeros with a few set bytes: compresses well whatever the dtype. */
function sparse(numel: number, dtype: DType, seed = 1): Tensor {
  const t = Tensor.empty([numel], dtype);
  const bytes = t.bytes();
  for (let i = seed; i < bytes.length; i += 97) bytes[i] = dtype === 'bool' ? 1 : (i * 31) & 0xff;
  return t;
}

function random(nbytes: number): Tensor {
  const t = Tensor.empty([nbytes], 'uint8');
  const bytes = t.bytes();
  let x = 0x9e3779b9;
  for (let i = 0; i < bytes.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return t;
}

/** Encodes, then restores each compressed tensor into a fresh one, as a receiver does. */
async function roundTrip(c: TensorCompressor, tensors: Tensor[]) {
  const encoded = await c.encode(tensors);
  const back = await Promise.all(
    encoded.map(async (e, i) => {
      if (e.compressedBytes === undefined) return tensors[i];
      const dest = Tensor.empty(tensors[i].shape, tensors[i].dtype);
      await c.decodeInto(dest, e.wire, 1000, 'test');
      e.lease!.release();
      return dest;
    }),
  );
  return { encoded, back };
}

describe('tensor compression', () => {
  for (const codec of ['lz4', 'zstd'] as const) {
    it(`${codec}: every dtype round-trips byte-exactly, odd sizes included`, async () => {
      // Enough zstd slots for all ten at once (saturation is tested below).
      const slots = codec === 'zstd' ? { max_inflight: DTYPES.length } : {};
      const c = compressor({ codec, excluded_dtypes: [], min_bytes: 0, ...slots });
      const tensors = DTYPES.map((d, i) => sparse(4099 + i, d, i));
      const { encoded, back } = await roundTrip(c, tensors);
      for (let i = 0; i < tensors.length; i++) {
        expect(encoded[i].compressedBytes, DTYPES[i]).toBeLessThan(tensors[i].nbytes);
        expect(encoded[i].codec).toBe(codec);
        expect(back[i]).not.toBe(tensors[i]);
        expect(back[i].dtype).toBe(tensors[i].dtype);
        expect(back[i].shape).toEqual(tensors[i].shape);
        expect(Buffer.from(back[i].bytes()).equals(Buffer.from(tensors[i].bytes())), DTYPES[i]).toBe(true);
      }
      expect(c.stats()).toMatchObject({ compressed: DTYPES.length, raw: 0 });
      expect(c.pool.stats().activeBytes).toBe(0);
    });
  }

  it('incompressible data stays raw and its buffer is dropped, not cached', async () => {
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] });
    const t = random(1 << 16);
    const [e] = await c.encode([t]);
    expect(e.wire).toBe(t);
    expect(e.compressedBytes).toBeUndefined();
    expect(c.pool.stats()).toMatchObject({ activeBytes: 0, cachedBytes: 0 });
  });

  it('skips excluded dtypes (float32 by default), tensors under min_bytes, and empty tensors', async () => {
    const c = compressor({ codec: 'lz4', min_bytes: 20_000 });
    const f32 = sparse(1 << 14, 'float32');
    const small = sparse(19_999, 'uint8');
    const big = sparse(20_000, 'uint8');
    const empty = Tensor.empty([0], 'uint8');
    const encoded = await c.encode([f32, small, big, empty]);
    expect(encoded.map((e) => e.compressedBytes !== undefined)).toEqual([false, false, true, false]);
    expect(c.isEligible(f32)).toBe(false);
    expect(compressor({ codec: 'lz4', excluded_dtypes: [], min_bytes: 0 }).isEligible(f32)).toBe(true);
  });

  it('zstd: a sender that finds every slot busy sends raw instead of waiting', async () => {
    const c = compressor({ codec: 'zstd', excluded_dtypes: [], max_inflight: 1 });
    const tensors = [sparse(1 << 16, 'uint8'), sparse(1 << 16, 'uint8'), sparse(1 << 16, 'uint8')];
    const encoded = await c.encode(tensors);
    expect(encoded.map((e) => e.compressedBytes !== undefined)).toEqual([true, false, false]);
    expect(encoded[1].wire).toBe(tensors[1]);
    // With the slot free again, the next message compresses.
    expect((await c.encode([tensors[1]]))[0].compressedBytes).toBeGreaterThan(0);
  });

  it('a pool without room sends raw', async () => {
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] }, 1 << 16);
    const encoded = await c.encode([sparse(1 << 16, 'uint8'), sparse(1 << 16, 'uint8')]);
    expect(encoded.map((e) => e.compressedBytes !== undefined)).toEqual([true, false]);
  });

  it('GPU seam: a tensor whose device is not cpu is never compressed; CPU tensors beside it are', async () => {
    // A CPU tensor relabelled as cuda:0 stands in for a GPU one, so this needs no CUDA (real ones: test/gpu/p2p.test.ts).
    const gpu = sparse(1 << 16, 'uint8');
    Object.defineProperty(gpu, 'device', { value: 'cuda:0' });
    const cpu = sparse(1 << 16, 'uint8');
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] });
    expect(c.isEligible(gpu)).toBe(false);
    const [g, h] = await c.encode([gpu, cpu]);
    expect(g.wire).toBe(gpu);
    expect(g.compressedBytes).toBeUndefined();
    expect(h.compressedBytes).toBeGreaterThan(0);
  });

  it('the header carries per-tensor compressed sizes and the codec; bad sizes are P2PHeaderErrors', () => {
    const spec = (compressedBytes?: number, device: 'cpu' | 'cuda:0' = 'cpu') => ({
      dtype: 'uint8' as const,
      shape: [100],
      device,
      ...(compressedBytes === undefined ? {} : { compressedBytes }),
    });
    const skeleton = serialize(null);
    const ok = decodeHeader(encodeHeader(MessageKind.message, 0, [spec(40), spec()], skeleton, 'zstd'));
    expect(ok.codec).toBe('zstd');
    expect(ok.tensors.map((t) => t.compressedBytes)).toEqual([40, undefined]);
    const bad: Array<[Uint8Array, RegExp]> = [
      [
        encodeHeader(MessageKind.message, 0, [spec(100)], skeleton, 'lz4'),
        /compressed size 100 is not in 1\.\.99/,
      ],
      [encodeHeader(MessageKind.message, 0, [spec(-5)], skeleton, 'lz4'), /compressed size -5/],
      [encodeHeader(MessageKind.message, 0, [spec(0.5)], skeleton, 'lz4'), /compressed size 0\.5/],
      [
        encodeHeader(MessageKind.message, 0, [spec(10)], skeleton),
        /compressed but the header names no codec/,
      ],
      [
        encodeHeader(MessageKind.message, 0, [spec(10, 'cuda:0')], skeleton, 'lz4'),
        /on cuda:0 is compressed/,
      ],
    ];
    const unknownCodec = encodeHeader(MessageKind.message, 0, [], skeleton);
    unknownCodec[6] = 7;
    bad.push([unknownCodec, /unknown codec id 7/]);
    for (const [bytes, message] of bad) {
      expect(() => decodeHeader(bytes)).toThrow(P2PHeaderError);
      expect(() => decodeHeader(bytes)).toThrow(message);
    }
  });

  it('the startup probe passes for both codecs and names a broken one', async () => {
    for (const codec of ['lz4', 'zstd'] as const) await probeCodec(compressor({ codec }).codec, 'worker "w"');
    const broken: TensorCodec = {
      name: 'lz4',
      maxInputBytes: 1 << 30,
      tryCompress: async (b) => b.slice(1),
      decompress: async (b) => b,
    };
    await expect(probeCodec(broken, 'worker "w"')).rejects.toThrow(
      /worker "w": codec lz4 failed its startup probe: the round trip changed the bytes/,
    );
  });
});
