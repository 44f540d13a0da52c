/** Tensor compression at unit level: eligibility, chunked round trips, raw fallbacks, zstd saturation, the GPU seam, chunk and header checks, the probe. */
import { serialize } from 'node:v8';
import { describe, expect, it } from 'vitest';
import {
  DTYPES,
  type DType,
  loadClusterConfig,
  P2PHeaderError,
  P2PProtocolError,
  Tensor,
} from '../src/index.ts';
import { probeCodec, type TensorCodec } from '../src/p2p/compression/codecs.ts';
import { CHUNK_BYTES, TensorCompressor } from '../src/p2p/compression/tensor-compressor.ts';
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

/** Sends `t` as the outbox does and restores it as the inbox does: its wire chunks, and what came back. */
async function roundTrip(c: TensorCompressor, t: Tensor) {
  const plan = c.plan(t);
  if (!plan) return { plan, wires: [t], back: t };
  const wires: Tensor[] = [];
  for await (const wire of c.chunks(plan)) wires.push(wire);
  const back = Tensor.empty(t.shape, t.dtype);
  for (const [k, wire] of wires.entries()) await c.restoreChunk(back, plan.chunkBytes, k, wire, 1000, 'test');
  c.finish(plan);
  return { plan, wires, back };
}

const sameBytes = (a: Tensor, b: Tensor) => Buffer.from(a.bytes()).equals(Buffer.from(b.bytes()));
/** True when `wire` is a view on `t`'s own memory (a raw chunk: no copy). */
const viewsInto = (wire: Tensor, t: Tensor) => wire.bytes().buffer === t.bytes().buffer;

/** A codec that counts its compressions. */
function counting(c: TensorCompressor): { calls: () => number } {
  let calls = 0;
  const compress = c.codec.compress.bind(c.codec);
  c.codec.compress = (input) => {
    calls++;
    return compress(input);
  };
  return { calls: () => calls };
}

describe('tensor compression', () => {
  for (const codec of ['lz4', 'zstd'] as const) {
    it(`${codec}: every dtype round-trips byte-exactly, odd sizes included`, async () => {
      const c = compressor({ codec, excluded_dtypes: [], min_bytes: 0 });
      for (const [i, dtype] of DTYPES.entries()) {
        const t = sparse(4099 + i, dtype, i);
        const { plan, wires, back } = await roundTrip(c, t);
        expect(plan?.count, dtype).toBe(1);
        expect(wires[0].nbytes, dtype).toBeLessThan(t.nbytes);
        expect(back).not.toBe(t);
        expect(back.dtype).toBe(t.dtype);
        expect(back.shape).toEqual(t.shape);
        expect(sameBytes(back, t), dtype).toBe(true);
      }
      expect(c.stats()).toMatchObject({ compressed: DTYPES.length, raw: 0 });
      expect(c.pool.stats().activeBytes).toBe(0);
    });

    it(`${codec}: a tensor of several chunks, one of them random, comes back exact; the random chunk travels raw`, async () => {
      const c = compressor({ codec, excluded_dtypes: [] });
      const t = sparse(3 * CHUNK_BYTES + 5, 'uint8');
      t.bytes().set(random(CHUNK_BYTES).bytes(), CHUNK_BYTES);
      const { plan, wires, back } = await roundTrip(c, t);
      expect(plan).toMatchObject({ chunkBytes: CHUNK_BYTES, count: 4 });
      // The 5-byte tail does not shrink either.
      expect(wires.map((w) => viewsInto(w, t))).toEqual([false, true, false, true]);
      expect(wires.map((w) => w.nbytes)).toEqual([wires[0].nbytes, CHUNK_BYTES, wires[2].nbytes, 5]);
      expect(wires[0].nbytes).toBeLessThan(CHUNK_BYTES / 4);
      expect(sameBytes(back, t)).toBe(true);
      const wireBytes = wires.reduce((sum, w) => sum + w.nbytes, 0);
      expect(c.stats()).toEqual({ compressed: 1, raw: 0, rawBytes: t.nbytes, wireBytes });
      expect(c.pool.stats()).toMatchObject({ activeBytes: 0, cachedBytes: t.nbytes });
    });
  }

  it('incompressible data goes raw as views on the tensor (no copy) and its buffer is dropped, not cached', async () => {
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] });
    const t = random(1 << 16);
    const { wires, back } = await roundTrip(c, t);
    expect(wires).toHaveLength(1);
    expect(viewsInto(wires[0], t)).toBe(true);
    expect(sameBytes(back, t)).toBe(true);
    expect(c.stats()).toMatchObject({ compressed: 0, raw: 1 });
    expect(c.pool.stats()).toMatchObject({ activeBytes: 0, cachedBytes: 0 });
  });

  it('stops trying after two chunks in a row did not shrink: the rest of a random tensor goes raw untried', async () => {
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] });
    const { calls } = counting(c);
    const t = random(12 * CHUNK_BYTES);
    const { wires, back } = await roundTrip(c, t);
    expect(wires).toHaveLength(12);
    expect(wires.every((w) => viewsInto(w, t))).toBe(true);
    expect(sameBytes(back, t)).toBe(true);
    // Two misses, plus the chunks already started ahead of them.
    expect(calls()).toBeLessThanOrEqual(6);
  });

  it('skips excluded dtypes (float32 by default), tensors under min_bytes, and empty tensors', async () => {
    const c = compressor({ codec: 'lz4', min_bytes: 20_000 });
    const f32 = sparse(1 << 14, 'float32');
    const small = sparse(19_999, 'uint8');
    const big = sparse(20_000, 'uint8');
    const empty = Tensor.empty([0], 'uint8');
    expect([f32, small, big, empty].map((t) => c.plan(t) !== undefined)).toEqual([false, false, true, false]);
    expect(c.isEligible(f32)).toBe(false);
    expect(compressor({ codec: 'lz4', excluded_dtypes: [], min_bytes: 0 }).isEligible(f32)).toBe(true);
  });

  it('zstd: a sender that finds every slot busy sends raw instead of waiting', async () => {
    const c = compressor({ codec: 'zstd', excluded_dtypes: [], max_inflight: 4 });
    const { calls } = counting(c);
    const t = sparse(1 << 16, 'uint8');
    // A message takes at most half the slots; two of them hold all four (other channels, decompression).
    expect([c.codec.reserve(5), c.codec.reserve(5), c.codec.reserve(5)]).toEqual([2, 2, 0]);
    const busy = await roundTrip(c, t);
    expect(viewsInto(busy.wires[0], t)).toBe(true);
    expect(sameBytes(busy.back, t)).toBe(true);
    expect(calls()).toBe(0);
    c.codec.unreserve(4);
    // With the slots free again, the next send compresses.
    expect((await roundTrip(c, t)).wires[0].nbytes).toBeLessThan(t.nbytes);
    expect(calls()).toBe(1);
  });

  it('a pool without room sends raw', () => {
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] }, 1 << 16);
    const plans = [sparse(1 << 16, 'uint8'), sparse(1 << 16, 'uint8')].map((t) => c.plan(t));
    expect(plans.map((p) => p !== undefined)).toEqual([true, false]);
    expect(c.stats()).toMatchObject({ raw: 1 });
  });

  it('GPU seam: a tensor whose device is not cpu is never compressed; CPU tensors beside it are', () => {
    // A CPU tensor relabelled as cuda:0 stands in for a GPU one, so this needs no CUDA (real ones: test/gpu/p2p.test.ts).
    const gpu = sparse(1 << 16, 'uint8');
    Object.defineProperty(gpu, 'device', { value: 'cuda:0' });
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] });
    expect(c.isEligible(gpu)).toBe(false);
    expect(c.plan(gpu)).toBeUndefined();
    expect(c.plan(sparse(1 << 16, 'uint8'))).toBeDefined();
  });

  it('a chunk of the wrong size or that does not restore to its raw size is an error naming it', async () => {
    const c = compressor({ codec: 'lz4', excluded_dtypes: [] });
    const dest = Tensor.empty([100], 'uint8');
    const restore = (wire: Tensor, k = 1) => c.restoreChunk(dest, 64, k, wire, 1000, 'recv from worker "a"');
    await expect(restore(Tensor.empty([37], 'uint8'))).rejects.toThrow(
      /recv from worker "a": chunk 1 of uint8\[100\] arrived as uint8\[37\]; expected 1\.\.36 bytes/,
    );
    await expect(restore(Tensor.empty([0], 'uint8'))).rejects.toThrow(P2PProtocolError);
    await expect(restore(Tensor.empty([4], 'float32'))).rejects.toThrow(/arrived as float32\[4\]/);
    const packed = await c.codec.compress(new Uint8Array(20));
    await expect(restore(Tensor.fromArray(packed, [packed.length], 'uint8'))).rejects.toThrow(
      /chunk 1 of uint8\[100\]: lz4 restored 20 bytes, not 36; the data is corrupt/,
    );
    await restore(Tensor.fromArray(new Uint8Array(36).fill(7), [36], 'uint8'));
    expect(dest.toArray().slice(63, 65)).toEqual([0, 7]);
  });

  it('the header carries per-tensor chunk sizes and the codec; bad ones are P2PHeaderErrors', () => {
    const spec = (chunkBytes?: number, device: 'cpu' | 'cuda:0' = 'cpu', numel = 100) => ({
      dtype: 'uint8' as const,
      shape: [numel],
      device,
      ...(chunkBytes === undefined ? {} : { chunkBytes }),
    });
    const skeleton = serialize(null);
    const ok = decodeHeader(
      encodeHeader(MessageKind.message, 0, [spec(40), spec(), spec(100)], skeleton, 'zstd'),
    );
    expect(ok.codec).toBe('zstd');
    expect(ok.tensors.map((t) => t.chunkBytes)).toEqual([40, undefined, 100]);
    const bad: Array<[Uint8Array, RegExp]> = [
      [
        encodeHeader(MessageKind.message, 0, [spec(101)], skeleton, 'lz4'),
        /chunk size 101 is not in 1\.\.100/,
      ],
      [encodeHeader(MessageKind.message, 0, [spec(0)], skeleton, 'lz4'), /chunk size 0 is not in 1\.\.100/],
      [encodeHeader(MessageKind.message, 0, [spec(-5)], skeleton, 'lz4'), /chunk size -5/],
      [encodeHeader(MessageKind.message, 0, [spec(0.5)], skeleton, 'lz4'), /chunk size 0\.5/],
      [
        encodeHeader(MessageKind.message, 0, [spec(1, 'cpu', 0)], skeleton, 'lz4'),
        /chunk size 1 is not in 1\.\.0/,
      ],
      [
        encodeHeader(MessageKind.message, 0, [spec(1, 'cpu', 2 ** 21)], skeleton, 'lz4'),
        /more than the limit of 1048576 chunks/,
      ],
      [
        encodeHeader(MessageKind.message, 0, [spec(10)], skeleton),
        /compressed but the header names no codec/,
      ],
      [
        encodeHeader(MessageKind.message, 0, [spec(10, 'cuda:0')], skeleton, 'lz4'),
        /on cuda:0 is compressed/,
      ],
    ];
    const rawWithChunks = encodeHeader(MessageKind.message, 0, [spec(40)], skeleton, 'lz4');
    rawWithChunks[24 + 5] = 0; // the compressed flag of the first tensor record
    bad.push([rawWithChunks, /tensor 0: a raw tensor declares a chunk size/]);
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
      reserve: (want) => want,
      unreserve: () => {},
      compress: async (b) => b.slice(1),
      decompress: async (b) => b,
    };
    await expect(probeCodec(broken, 'worker "w"')).rejects.toThrow(
      /worker "w": codec lz4 failed its startup probe: the round trip changed the bytes/,
    );
  });
});
