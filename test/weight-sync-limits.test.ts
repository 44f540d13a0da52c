/**
 * Weight-sync records under malformed and hostile input: seeded fuzzes of the bucket header and the
 * stream end, and a receiver refusing a tensor over its maxTensorBytes before allocating it.
 */
import { describe, expect, it } from 'vitest';
import { Tensor, WeightSyncEngine, WeightSyncHeaderError } from '../src/index.ts';
import { DTYPES, itemSize } from '../src/tensor/dtype.ts';
import { rankTest } from '../src/testing/index.ts';
import {
  alignUp,
  type BucketEntry,
  decodeBucketHeader,
  encodeBucketHeader,
  tensorBytes,
} from '../src/weight-sync/header.ts';
import { decodeStreamEnd, encodeStreamEnd } from '../src/weight-sync/stream-end.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';

const int = (rnd: () => number, n: number) => Math.floor(rnd() * n);
const MAX_PAYLOAD = 1 << 16;
const MAX_TENSOR = 1 << 12;

/** A valid header: whole small tensors packed at aligned offsets, names ASCII or not. */
function drawHeader(rnd: () => number): Uint8Array {
  const entries: BucketEntry[] = [];
  let offset = 0;
  for (let i = int(rnd, 6); i > 0; i--) {
    const dtype = DTYPES[int(rnd, DTYPES.length)];
    const shape = Array.from({ length: int(rnd, 4) }, () => 1 + int(rnd, 5));
    const bytes = tensorBytes(dtype, shape);
    entries.push({
      name: rnd() < 0.8 ? `w.${i}` : `ü.${i}`,
      dtype,
      shape,
      offset,
      chunkStart: 0,
      chunkBytes: bytes,
    });
    offset = alignUp(offset + bytes);
  }
  const header = {
    index: int(rnd, 100),
    last: rnd() < 0.5,
    payloadBytes: offset,
    sync: 1 + int(rnd, 100),
    digest: int(rnd, 2 ** 32),
    unchangedSince: 0,
  };
  return encodeBucketHeader({ ...header, views: rnd() < 0.5, entries });
}

/** Truncation, bit flips, random bytes, and u32 fields (counts, dims, offsets) overwritten with large values. */
function mutate(rnd: () => number, bytes: Uint8Array): Uint8Array {
  const out = bytes.slice(0, rnd() < 0.25 ? int(rnd, bytes.length + 1) : bytes.length);
  const view = new DataView(out.buffer);
  for (let f = int(rnd, 4); f > 0 && out.length > 0; f--) {
    const at = int(rnd, out.length);
    const choice = rnd();
    if (choice < 0.4) out[at] ^= 1 << int(rnd, 8);
    else if (choice < 0.7) out[at] = int(rnd, 256);
    else if (at + 4 <= out.length)
      view.setUint32(at, [0xffffffff, 2 ** 31, 1 << 20, MAX_TENSOR + 1][int(rnd, 4)], true);
  }
  return out;
}

/**
 * Runs `attempt` on 20,000 seeded draws and expects a fair share of each outcome: decoded (its
 * checks passed) or refused with a WeightSyncHeaderError. Any other error fails the test as it is.
 */
function expectFuzzOutcomes(seed: number, attempt: (rnd: () => number) => void): void {
  const rnd = mulberry32(seed);
  const outcomes = { ok: 0, error: 0 };
  for (let i = 0; i < 20_000; i++) {
    try {
      attempt(rnd);
      outcomes.ok++;
    } catch (error) {
      if (!(error instanceof WeightSyncHeaderError)) throw error;
      outcomes.error++;
    }
  }
  expect(outcomes.error).toBeGreaterThan(5000);
  expect(outcomes.ok).toBeGreaterThan(1000);
}

describe('weight-sync decoders under fuzzing', () => {
  it('20,000 mutated bucket headers: a WeightSyncHeaderError or a header within the limits', () => {
    expectFuzzOutcomes(77, (rnd) => {
      const header = decodeBucketHeader(mutate(rnd, drawHeader(rnd)), MAX_PAYLOAD, MAX_TENSOR);
      // Plain checks, expect() only on a violation: 20,000 rounds of matchers cost seconds.
      const unbounded = header.entries.find(
        (e) =>
          tensorBytes(e.dtype, e.shape) > MAX_TENSOR ||
          e.offset + e.chunkBytes > header.payloadBytes ||
          e.chunkBytes % itemSize(e.dtype) !== 0,
      );
      if (header.payloadBytes > MAX_PAYLOAD || unbounded) expect.fail(`accepted ${JSON.stringify(header)}`);
    });
  });

  it('20,000 mutated stream ends: a WeightSyncHeaderError or a bounded record', () => {
    expectFuzzOutcomes(78, (rnd) => {
      const end =
        rnd() < 0.5
          ? {
              failed: false as const,
              buckets: int(rnd, 1e6),
              tensors: int(rnd, 1e6),
              digest: int(rnd, 2 ** 32),
            }
          : { failed: true as const, error: 'x'.repeat(int(rnd, 200)) };
      const decoded = decodeStreamEnd(mutate(rnd, encodeStreamEnd(end)));
      if (decoded.failed && decoded.error.length > 4096)
        expect.fail(`accepted an error of ${decoded.error.length} characters`);
    });
  });

  it('a header declaring a tensor over maxTensorBytes is refused, naming the entry and the limit', () => {
    const entry = {
      name: 'emb',
      dtype: 'int8' as const,
      shape: [2 ** 31],
      offset: 0,
      chunkStart: 0,
      chunkBytes: 16,
    };
    const bytes = encodeBucketHeader({
      index: 0,
      last: false,
      payloadBytes: 16,
      sync: 1,
      digest: 0,
      unchangedSince: 0,
      views: false,
      entries: [entry],
    });
    expect(bytes.length).toBeLessThan(64);
    expect(() => decodeBucketHeader(bytes, MAX_PAYLOAD, 1 << 30)).toThrow(WeightSyncHeaderError);
    expect(() => decodeBucketHeader(bytes, MAX_PAYLOAD, 1 << 30)).toThrow(
      /entry 0 \('emb', int8\[2147483648\]\) needs 2147483648 bytes \(limit 1073741824, maxTensorBytes\)/,
    );
  });
});

describe('weight-sync receiver limit', () => {
  rankTest(
    'a receiver refuses a tensor over its maxTensorBytes before allocating it, and its sender learns why',
    { worldSize: 2 },
    async (ctx) => {
      const receiving = ctx.rank === 1;
      // Each side's own options: only the receiver's limit matters, and it is smaller than the tensor.
      const engine = new WeightSyncEngine(ctx.world, {
        senders: [0],
        receivers: [1],
        bucketBytes: 1024,
        timeoutMs: 5000,
        ...(receiving ? { maxTensorBytes: 4096 } : {}),
      });
      const big = /needs 16384 bytes \(limit 4096, maxTensorBytes\)/;
      if (receiving) {
        const received: string[] = [];
        const error = await (async () => {
          for await (const [name] of engine.receive()) received.push(name);
        })().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(WeightSyncHeaderError);
        expect((error as Error).message).toMatch(big);
        // The first bucket holds 'small' and the first piece of 'big': refused whole, nothing yielded.
        expect(received).toEqual([]);
        return;
      }
      const weights: Array<[string, Tensor]> = [
        ['small', Tensor.ones([16], 'float32')],
        ['big', Tensor.ones([4096], 'float32')],
      ];
      await expect(engine.send(weights)).rejects.toThrow(big);
    },
  );
});
