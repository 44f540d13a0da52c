/**
 * Pure parts of weight sync, no threads: the binary header, the bucket plan, the stream digest, the routes
 * and pieces across nodes, and the sender over a stand-in group.
 */
import { describe, expect, it } from 'vitest';
import { Tensor, type ThreadGroup, WeightSyncHeaderError } from '../src/index.ts';
import { UNTIMED } from '../src/predict/layer-clock.ts';
import { chainDigest, DIGEST_SEED, stampDigest } from '../src/weight-sync/digest.ts';
import {
  type BucketHeader,
  decodeBucketHeader,
  encodeBucketHeader,
  FIXED_HEADER_BYTES,
  HEADER_LIMITS,
} from '../src/weight-sync/header.ts';
import { isAlone, piecesOf } from '../src/weight-sync/pieces.ts';
import { type PlannedBucket, planBuckets } from '../src/weight-sync/plan.ts';
import { tagsFrom } from '../src/weight-sync/protocol.ts';
import { planRoutes } from '../src/weight-sync/routes.ts';
import { BucketSender } from '../src/weight-sync/sender.ts';
import { decodeStreamEnd, encodeStreamEnd, isStreamEnd } from '../src/weight-sync/stream-end.ts';
import { TEST_BUCKET_BYTES, testModel } from './fixtures/weight-sync-model.ts';

const HEADER: BucketHeader = {
  index: 5,
  last: true,
  payloadBytes: 96,
  sync: 7,
  digest: 0xdeadbeef,
  unchangedSince: 3,
  views: false,
  entries: [
    { name: 'a.bias', dtype: 'bfloat16', shape: [7], offset: 0, chunkStart: 0, chunkBytes: 14 },
    { name: 'ü.weight', dtype: 'float32', shape: [2, 3], offset: 16, chunkStart: 0, chunkBytes: 24 },
    { name: 'big', dtype: 'int64', shape: [100], offset: 48, chunkStart: 400, chunkBytes: 48 },
    { name: 'empty', dtype: 'bool', shape: [0, 4], offset: 96, chunkStart: 0, chunkBytes: 0 },
  ],
};

/** Encodes HEADER, lets `edit` corrupt the bytes, and returns the decoder's message. */
function corrupt(
  edit: (view: DataView, bytes: Uint8Array) => Uint8Array | undefined,
  header = HEADER,
): string {
  const bytes = encodeBucketHeader(header);
  const out = edit(new DataView(bytes.buffer), bytes) ?? bytes;
  try {
    decodeBucketHeader(out, 1024);
    return 'parsed';
  } catch (error) {
    expect(error).toBeInstanceOf(WeightSyncHeaderError);
    return (error as Error).message;
  }
}

/** Byte position of entry 0's fields: after the fixed part and the 2-byte name length + 6-byte name. */
const ENTRY0 = FIXED_HEADER_BYTES + 2 + 'a.bias'.length;

describe('bucket header', () => {
  it('round-trips every field', () => {
    expect(decodeBucketHeader(encodeBucketHeader(HEADER), 1024)).toEqual(HEADER);
    const lent = { ...HEADER, last: false, views: true };
    expect(decodeBucketHeader(encodeBucketHeader(lent), 1024)).toEqual(lent);
  });

  it('refuses malformed headers with a message naming the field, before allocating', () => {
    expect(corrupt((_, b) => b.subarray(0, 10))).toMatch(/10 bytes, shorter than the 32-byte fixed part/);
    expect(corrupt((v) => void v.setUint32(0, 0x12345678, true))).toMatch(/bad magic 0x12345678/);
    expect(corrupt((v) => void v.setUint16(4, 9, true))).toMatch(/unsupported version 9/);
    expect(corrupt((v) => void v.setUint16(6, 0x8001, true))).toMatch(/unknown flags 0x8001/);
    // A few bytes claiming a billion entries: refused by arithmetic, no array of that size is made.
    expect(corrupt((v) => void v.setUint32(12, 1e9, true))).toMatch(/entry count 1000000000 exceeds/);
    expect(corrupt((v) => void v.setUint32(16, 5000, true))).toMatch(
      /payload of 5000 bytes exceeds the 1024-byte bucket/,
    );
    expect(corrupt((_, b) => b.subarray(0, b.length - 3))).toMatch(
      /truncated at byte \d+ while reading entry 3/,
    );
    expect(corrupt((_, b) => Uint8Array.of(...b, 0))).toMatch(/1 unexpected bytes after entry 3/);
    expect(corrupt((v) => void v.setUint16(FIXED_HEADER_BYTES, 5000, true))).toMatch(
      /entry 0 name of 5000 bytes exceeds 1024/,
    );
    expect(corrupt((_, b) => void b.set([0xff], FIXED_HEADER_BYTES + 2))).toMatch(
      /entry 0 name is not valid UTF-8/,
    );
    expect(corrupt((v) => void v.setUint8(ENTRY0, 99))).toMatch(
      /entry 0 \('a.bias'\) has unknown dtype code 99/,
    );
    expect(corrupt((v) => void v.setUint8(ENTRY0 + 1, 200))).toMatch(/has 200 dims \(limit 8\)/);
    // dims at ENTRY0+2 (one u32), then offset, chunk start, chunk bytes.
    expect(corrupt((v) => void v.setUint32(ENTRY0 + 2, 0xffffffff, true))).toMatch(
      /needs \d+ bytes \(limit 4294967296, maxTensorBytes\)/,
    );
    expect(corrupt((v) => void v.setUint32(ENTRY0 + 6, 4, true))).toMatch(/offset 4 is not a multiple of 16/);
    expect(corrupt((v) => void v.setUint32(ENTRY0 + 10, 1, true))).toMatch(
      /does not fall on 2-byte element boundaries/,
    );
    expect(corrupt((v) => void v.setUint32(ENTRY0 + 14, 16, true))).toMatch(
      /chunk \[0, \+16\) runs past its 14 bytes/,
    );
    expect(corrupt((v) => void v.setUint32(ENTRY0 + 6, 16, true))).toMatch(
      /entry 1 .* overlaps the previous chunk/,
    );
    expect(corrupt((v) => void v.setUint32(16, 64, true))).toMatch(
      /entry 2 \('big'\) ends at byte 96, past the 64-byte payload/,
    );
    expect(corrupt((v) => void v.setUint32(ENTRY0 + 14, 0, true))).toMatch(/has an empty chunk/);
    expect(decodeBucketHeader.bind(null, 'text', 1024)).toThrow(/expected bytes, got string/);
    expect(HEADER_LIMITS.maxHeaderBytes).toBeLessThanOrEqual(16 << 20);
  });

  it('the running digest changes with any header field and chains across buckets', () => {
    const a = encodeBucketHeader(HEADER);
    const b = encodeBucketHeader({
      ...HEADER,
      entries: [{ ...HEADER.entries[0], name: 'a.biaz' }, ...HEADER.entries.slice(1)],
    });
    expect(chainDigest(DIGEST_SEED, a)).not.toBe(chainDigest(DIGEST_SEED, b));
    expect(chainDigest(1, a)).not.toBe(chainDigest(2, a));
    // The digest field itself does not feed the digest, so a receiver can recompute it from what arrived.
    const stamped = stampDigest(DIGEST_SEED, a);
    expect(decodeBucketHeader(a, 1024).digest).toBe(stamped);
    expect(chainDigest(DIGEST_SEED, a)).toBe(stamped);
  });
});

describe('stream end', () => {
  it('round-trips a planned stream and a failure, and is told apart from a bucket header', () => {
    const planned = { failed: false, buckets: 7, tensors: 19, digest: 0xdeadbeef } as const;
    const failed = { failed: true, error: 'Error: out of memory at w.20 (ü)' } as const;
    expect(decodeStreamEnd(encodeStreamEnd(planned))).toEqual(planned);
    expect(decodeStreamEnd(encodeStreamEnd(failed))).toEqual(failed);
    expect(isStreamEnd(encodeStreamEnd(planned))).toBe(true);
    expect(isStreamEnd(encodeBucketHeader(HEADER))).toBe(false);
    expect(isStreamEnd('text')).toBe(false);
    // A huge error message travels cut to a bounded size.
    const long = decodeStreamEnd(encodeStreamEnd({ failed: true, error: 'x'.repeat(100_000) }));
    expect(long.failed && long.error.length).toBe(4096);
  });

  it('refuses a malformed stream end with a WeightSyncHeaderError naming the field', () => {
    const bytes = () => encodeStreamEnd({ failed: true, error: 'boom' });
    const decode = (b: Uint8Array) => () => decodeStreamEnd(b);
    const edit = (f: (v: DataView, b: Uint8Array) => void) => {
      const b = bytes();
      f(new DataView(b.buffer), b);
      return b;
    };
    expect(decode(bytes().subarray(0, 10))).toThrow(WeightSyncHeaderError);
    expect(decode(bytes().subarray(0, 10))).toThrow(/10 bytes, shorter than 24/);
    expect(decode(edit((v) => v.setUint16(4, 9, true)))).toThrow(/unsupported version 9/);
    expect(decode(edit((v) => v.setUint16(6, 6, true)))).toThrow(/unknown flags 0x6/);
    expect(decode(edit((v) => v.setUint32(20, 1e9, true)))).toThrow(
      /message length 1000000000 does not match/,
    );
    expect(decode(edit((v) => v.setUint16(6, 0, true)))).toThrow(
      /a stream end that did not fail carries a message/,
    );
  });
});

async function plan(weights: Iterable<readonly [string, Tensor]>, bucketBytes = TEST_BUCKET_BYTES) {
  const buckets: PlannedBucket[] = [];
  for await (const b of planBuckets(weights, bucketBytes, 'test')) buckets.push(b);
  return buckets;
}

describe('bucket plan', () => {
  it('aligns every chunk to 16 bytes, splits the 3.5× tensor and reassembles it in order', async () => {
    const model = testModel(1);
    const buckets = await plan(model);
    expect(buckets.map((b) => b.index)).toEqual(buckets.map((_, i) => i));
    expect(buckets.map((b) => b.last)).toEqual(buckets.map((_, i) => i === buckets.length - 1));
    for (const b of buckets) {
      expect(b.payloadBytes).toBeLessThanOrEqual(TEST_BUCKET_BYTES);
      for (const c of b.chunks) {
        expect(c.offset % 16).toBe(0);
        expect(c.offset + c.chunkBytes).toBeLessThanOrEqual(b.payloadBytes);
      }
    }
    const chunks = buckets.flatMap((b) => b.chunks);
    // The float32 right after the 7-element bfloat16 (14 bytes) starts at 16, not 14.
    expect(chunks[1]).toMatchObject({ name: 'embed.weight', offset: 16 });
    const big = chunks.filter((c) => c.name === 'layer.0.big');
    expect(big.map((c) => c.chunkBytes).reduce((a, b) => a + b)).toBe(14336);
    expect(big.length).toBeGreaterThanOrEqual(4);
    expect(big.map((c) => c.chunkStart)).toEqual(
      big.map((_, i) => big.slice(0, i).reduce((a, c) => a + c.chunkBytes, 0)),
    );
    // Tensors in stream order, each once from start to end (empty tensors included).
    const names = chunks.filter((c) => c.chunkStart === 0).map((c) => c.name);
    expect(names).toEqual(model.map(([n]) => n));
  });

  it('moves a tensor that fits a bucket whole to the next bucket instead of splitting it', async () => {
    const t = (n: number) => Tensor.empty([n], 'uint8');
    const buckets = await plan(
      [
        ['a', t(40)],
        ['b', t(40)],
        ['c', t(0)],
      ],
      64,
    );
    expect(buckets.map((b) => b.chunks.map((c) => [c.name, c.offset, c.chunkBytes]))).toEqual([
      [['a', 0, 40]],
      [
        ['b', 0, 40],
        ['c', 48, 0],
      ],
    ]);
    expect(buckets.map((b) => b.payloadBytes)).toEqual([40, 48]);
  });

  it('an empty stream is one empty last bucket; bad entries are named', async () => {
    expect(await plan([])).toEqual([{ index: 0, last: true, payloadBytes: 0, chunks: [] }]);
    const strided = Tensor.empty([2, 3]).transpose(0, 1);
    await expect(plan([['w', strided]])).rejects.toThrow(
      /test: stream entry 0 \('w'\): tensor float32\[3,2\] is not contiguous/,
    );
    await expect(plan([['', Tensor.empty([1])]])).rejects.toThrow(
      /stream entry 0: the name must be a non-empty string/,
    );
    await expect(plan([['x', Tensor.empty([1])], ['y'] as never])).rejects.toThrow(
      /stream entry 1 must be a \[name, Tensor\] pair/,
    );
    await expect(plan(42 as never)).rejects.toThrow(/weights must be an Iterable or AsyncIterable/);
  });
});

/** A one-receiver sender over a stand-in group, with 64-byte buckets. */
const stubSender = (group: ThreadGroup, lend: boolean) =>
  new BucketSender(
    group,
    {
      senders: [0],
      receivers: [1],
      bucketBytes: 64,
      phase: 1,
      timeoutMs: 5000,
      tags: tagsFrom(0),
      delta: false,
      lend,
      maxTensorBytes: HEADER_LIMITS.maxTensorBytes,
      routes: planRoutes([0], [1], () => 0),
    },
    () => UNTIMED,
  );

describe('bucket sender', () => {
  it("sends payloads in bucket order even when a later bucket's header is taken first", async () => {
    // A stand-in group: the first header waits until released, every other message goes through at once.
    let releaseFirst!: () => void;
    const firstHeader = new Promise<void>((resolve) => (releaseFirst = resolve));
    let headers = 0;
    const payloads: number[] = [];
    const group = {
      rank: 0,
      nodeOf: () => 0,
      sendObject: () => (headers++ === 0 ? firstHeader : Promise.resolve()),
      send: (t: Tensor) => {
        payloads.push(t.numel);
        return Promise.resolve();
      },
      recvObject: () => Promise.resolve({ ok: true, holds: true }),
    } as unknown as ThreadGroup;
    const sender = stubSender(group, false);
    // 48, 40 and 24 bytes: one bucket each, so the payload sizes tell the buckets apart.
    const stream = [48, 40, 24].map((n, i): [string, Tensor] => [`t${i}`, Tensor.empty([n], 'uint8')]);
    const sent = sender.send(stream, 'test');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(payloads).toEqual([]); // bucket 1's header went through, but its payload waits for bucket 0's
    releaseFirst();
    await sent;
    expect(payloads).toEqual([48, 40, 24]);
  });

  it('lending, sends each bucket as one message (its header, then a view per entry), in bucket order, two in flight', async () => {
    const released: Array<() => void> = [];
    const lent: Array<{ header: unknown; views: number[] }> = [];
    const group = {
      rank: 0,
      nodeOf: () => 0,
      sendObject: () => Promise.reject(new Error('a lending sender sends no object messages')),
      sendViews: ([head, ...views]: Tensor[]) => {
        const bytes = head.bytes().slice();
        lent.push({
          header: isStreamEnd(bytes) ? 'end' : decodeBucketHeader(bytes, 64).index,
          views: views.map((v) => v.nbytes),
        });
        return new Promise<void>((resolve) => released.push(resolve));
      },
      recvObject: () => Promise.resolve({ ok: true, holds: true }),
    } as unknown as ThreadGroup;
    const sender = stubSender(group, true);
    const stream = [48, 8, 40, 24].map((n, i): [string, Tensor] => [`t${i}`, Tensor.empty([n], 'uint8')]);
    const sent = sender.send(stream, 'test');
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Nothing was released yet: the first two buckets are out (views on the tensors, not packed), the third waits.
    expect(lent).toEqual([
      { header: 0, views: [48, 8] },
      { header: 1, views: [40] },
    ]);
    released.shift()?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Bucket 0 came back: bucket 2 goes out, and with everything issued, the stream end behind it.
    expect(lent.slice(2)).toEqual([
      { header: 2, views: [24] },
      { header: 'end', views: [] },
    ]);
    while (released.length > 0) released.shift()?.();
    await sent;
  });
});

describe('routes across nodes', () => {
  // Nodes: 0 holds sender 0 and receiver 1; 1 holds sender 2 and receivers 3, 4; 2 holds receivers 5, 6, 7.
  const node = [0, 0, 1, 1, 1, 2, 2, 2];
  const routes = planRoutes([0, 2], [7, 5, 6, 3, 4, 1], (r) => node[r]);

  it("sends to its own node's receivers and one relay per other node: the node's lowest receiving rank", () => {
    expect(routes.targetsOf(0)).toEqual([5, 3, 1]);
    expect(routes.targetsOf(2)).toEqual([5, 3, 4, 1]);
  });

  it("has each other receiver take a sender's buckets from its node's relay, unless on the sender's node", () => {
    expect([1, 3, 4, 5, 6, 7].map((r) => routes.sourceOf(0, r))).toEqual([0, 0, 3, 0, 5, 5]);
    // Receiver 1 is node 0's relay (and its only receiver): it takes sender 2's buckets from the network.
    expect([1, 3, 4, 5, 6, 7].map((r) => routes.sourceOf(2, r))).toEqual([2, 2, 2, 2, 5, 5]);
    expect(routes.followersOf(5, 0)).toEqual([7, 6]);
    expect(routes.followersOf(3, 0)).toEqual([4]);
    // Node 1 holds sender 2: its receivers take 2's buckets straight from it, and 3 relays none of them.
    expect(routes.followersOf(3, 2)).toEqual([]);
    expect(routes.followersOf(1, 2)).toEqual([]);
    expect(routes.followersOf(6, 0)).toEqual([]);
  });

  it('is direct everywhere on one node', () => {
    const one = planRoutes([0, 1], [2, 3, 4], () => 0);
    expect(one.targetsOf(0)).toEqual([2, 3, 4]);
    expect(one.followersOf(2, 0)).toEqual([]);
  });
});

describe('pieces across nodes', () => {
  const KiB = 1024;
  const at = (offset: number, chunkBytes: number) => ({ offset, chunkBytes });

  it('sends an entry of 256 KiB or a quarter of the payload alone, and each run of smaller ones as one piece', () => {
    const entries = [at(0, 10), at(16, 20), at(48, 256 * KiB), at(48 + 256 * KiB, 0), at(48 + 256 * KiB, 5)];
    const pieces = piecesOf(entries, 2 * 1024 * KiB);
    expect(pieces).toEqual([
      { first: 0, end: 2, start: 0, bytes: 36 },
      { first: 2, end: 3, start: 48, bytes: 256 * KiB },
      // A run of one entry covers its bytes alone: it travels as one.
      { first: 3, end: 5, start: 48 + 256 * KiB, bytes: 5 },
    ]);
    expect(pieces.map(isAlone)).toEqual([false, true, false]);
    // In a small payload a quarter of it is enough; runs of empty entries are no piece.
    expect(piecesOf([at(0, 0), at(0, 30), at(32, 0)], 100)).toEqual([
      { first: 1, end: 2, start: 0, bytes: 30 },
    ]);
    expect(piecesOf([at(0, 0), at(0, 0)], 0)).toEqual([]);
  });

  it('a sender sends a large entry to another node straight from its tensor, packing only the small ones', async () => {
    const sent: Tensor[] = [];
    const group = {
      rank: 0,
      // Receiver 1 is on another node.
      nodeOf: (r: number) => r,
      sendObject: () => Promise.resolve(),
      send: (t: Tensor) => {
        sent.push(t);
        return Promise.resolve();
      },
      recvObject: () => Promise.resolve({ ok: true, holds: true }),
    } as unknown as ThreadGroup;
    const big = Tensor.empty([40], 'uint8');
    const small = [Tensor.full([4], 1, 'uint8'), Tensor.full([3], 2, 'uint8')];
    // One 64-byte bucket: 4 + 3 bytes (packed at 0 and 16), then 40 alone at 32.
    await stubSender(group, false).send(
      [
        ['a', small[0]],
        ['b', small[1]],
        ['big', big],
      ],
      'test',
    );
    expect(sent.map((t) => t.nbytes)).toEqual([19, 40]);
    expect(sent[1].bytes().buffer).toBe(big.bytes().buffer);
    expect(Array.from(sent[0].bytes())).toEqual([1, 1, 1, 1, ...Array(12).fill(0), 2, 2, 2]);
  });
});
