/**
 * The header decoder and skeleton code under malformed input (seeded random fuzzing plus targeted
 * cases), and a receiver refusing a message that declares more than its limit.
 */
import { serialize } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { Collective, DTYPES, P2PHeaderError, Tensor } from '../src/index.ts';
import {
  DEFAULT_HEADER_LIMITS,
  decodeHeader,
  encodeHeader,
  type HeaderLimits,
  MessageKind,
  type TensorSpec,
} from '../src/p2p/header.ts';
import { fillSkeleton, PLACEHOLDER_KEY, splitValue } from '../src/p2p/skeleton.ts';
import { itemSize } from '../src/tensor/dtype.ts';
import { checkSize } from '../src/tensor/shape.ts';
import { rankTest } from '../src/testing/index.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';

const int = (rnd: () => number, n: number) => Math.floor(rnd() * n);

interface Drawn {
  kind: MessageKind;
  seq: number;
  specs: TensorSpec[];
  skeleton: unknown;
}

function drawHeader(rnd: () => number): Drawn {
  const specs: TensorSpec[] = Array.from({ length: int(rnd, 5) }, () => ({
    dtype: DTYPES[int(rnd, DTYPES.length)],
    shape: Array.from({ length: int(rnd, 4) }, () => int(rnd, 6)),
    device: rnd() < 0.8 ? 'cpu' : `cuda:${int(rnd, 4)}`,
  }));
  const skeleton = { step: int(rnd, 100), parts: specs.map((_, i) => ({ [PLACEHOLDER_KEY]: i })), s: 'x' };
  const kind = rnd() < 0.5 ? MessageKind.message : MessageKind.broadcast;
  return { kind, seq: int(rnd, 1e6), specs, skeleton };
}

const encode = (d: Drawn) => encodeHeader(d.kind, d.seq, d.specs, serialize(d.skeleton));

/** Small limits make "never an unbounded allocation" observable: a header may only declare this much. */
const LIMITS: HeaderLimits = {
  maxHeaderBytes: 4096,
  maxTensors: 64,
  maxDims: 8,
  maxMessageBytes: 1 << 20,
  maxChunks: 256,
};

function expectCleanOutcome(bytes: Uint8Array): 'ok' | 'error' {
  try {
    const header = decodeHeader(bytes, LIMITS);
    const declared = header.tensors.reduce((sum, t) => sum + t.shape.reduce((a, b) => a * b, 1) * 8, 0);
    expect(declared).toBeLessThanOrEqual(LIMITS.maxMessageBytes * 8);
    expect(header.tensors.length).toBeLessThanOrEqual(LIMITS.maxTensors);
    const chunks = header.tensors.reduce(
      (sum, t) => sum + (t.chunkBytes ? Math.ceil(t.shape.reduce((a, b) => a * b, 1) / t.chunkBytes) : 0),
      0,
    );
    expect(chunks).toBeLessThanOrEqual(LIMITS.maxChunks);
    return 'ok';
  } catch (error) {
    expect(error).toBeInstanceOf(P2PHeaderError);
    expect((error as Error).message).toMatch(/p2p header/);
    return 'error';
  }
}

describe('p2p header decoder', () => {
  it('round-trips random headers', () => {
    const rnd = mulberry32(1);
    for (let i = 0; i < 200; i++) {
      const drawn = drawHeader(rnd);
      const { kind, seq, tensors, skeleton } = decodeHeader(encode(drawn));
      expect({ kind, seq, specs: tensors, skeleton }).toEqual(drawn);
    }
  });

  it('fuzz: truncations, bit flips and random overwrites give a P2PHeaderError or a bounded header', () => {
    const rnd = mulberry32(42);
    const outcomes = { ok: 0, error: 0 };
    for (let i = 0; i < 3000; i++) {
      const bytes = encode(drawHeader(rnd));
      const mutated = bytes.slice(0, rnd() < 0.3 ? int(rnd, bytes.length) : bytes.length);
      for (let f = int(rnd, 4); f >= 0; f--) {
        const at = int(rnd, mutated.length);
        if (rnd() < 0.5) mutated[at] ^= 1 << int(rnd, 8);
        else mutated[at] = int(rnd, 256);
      }
      outcomes[expectCleanOutcome(mutated)]++;
    }
    expect(outcomes.error).toBeGreaterThan(1000);
  });

  it('huge counts and sizes are refused before any per-tensor work', () => {
    const base = encodeHeader(
      MessageKind.message,
      0,
      [{ dtype: 'float32', shape: [4], device: 'cpu' }],
      serialize(0),
    );
    const patch = (write: (v: DataView) => void) => {
      const b = base.slice();
      write(new DataView(b.buffer));
      return b;
    };
    const cases: Array<[Uint8Array, RegExp]> = [
      [patch((v) => v.setUint32(12, 0xffffffff, true)), /tensors exceed the limit/],
      [patch((v) => v.setUint32(12, 40, true)), /40 tensor records .* do not fit/],
      [patch((v) => v.setUint32(16, 0xffffffff, true)), /do not fit/],
      [patch((v) => v.setUint32(20, 0xffffffff, true)), /declares 4294967295 bytes but \d+ arrived/],
      [patch((v) => v.setUint8(28, 200)), /200 dimensions exceed the limit/],
      [patch((v) => v.setFloat64(40, 2 ** 40, true)), /over the limit of 1048576/],
      [patch((v) => v.setFloat64(40, -1, true)), /size -1 of dim 0 is invalid/],
      [patch((v) => v.setFloat64(40, 0.5, true)), /size 0.5 of dim 0 is invalid/],
      [patch((v) => v.setUint8(24, 99)), /unknown dtype code 99/],
      [patch((v) => v.setUint8(5, 9)), /unknown kind 9/],
      [patch((v) => v.setUint32(0, 0x12345678, true)), /bad magic/],
      [base.subarray(0, 3), /shorter than/],
      [
        new Uint8Array(LIMITS.maxHeaderBytes + 1).fill(0).map((_, i) => base[i] ?? 0),
        /larger than the limit/,
      ],
    ];
    for (const [bytes, message] of cases) {
      const started = performance.now();
      expect(() => decodeHeader(bytes, LIMITS)).toThrow(message);
      // Refused before allocating what it declares: zeroing gigabytes would take seconds.
      expect(performance.now() - started).toBeLessThan(2000);
    }
  });

  it('fuzz with the default limits: 20,000 headers, sizes overwritten too; a P2PHeaderError or tensors a receiver can allocate', () => {
    const rnd = mulberry32(2026);
    const bigSizes = [2 ** 31, 2 ** 32, 2 ** 32 + 1, 2 ** 33, 2 ** 36, 2 ** 40, 2 ** 53 - 1];
    const outcomes = { ok: 0, error: 0 };
    for (let i = 0; i < 20_000; i++) {
      const drawn = drawHeader(rnd);
      const bytes = encode(drawn);
      const view = new DataView(bytes.buffer);
      // Each tensor record's first size sits 16 bytes in; a hostile sender writes any f64 there.
      let at = 24;
      for (const spec of drawn.specs) {
        if (spec.shape.length > 0 && rnd() < 0.5) {
          view.setFloat64(at + 16, bigSizes[int(rnd, bigSizes.length)], true);
        }
        at += 16 + 8 * spec.shape.length;
      }
      const mutated =
        rnd() < 0.5 ? bytes : bytes.slice(0, rnd() < 0.3 ? int(rnd, bytes.length) : bytes.length);
      for (let f = int(rnd, 3); f > 0; f--) mutated[int(rnd, mutated.length)] ^= 1 << int(rnd, 8);
      try {
        const header = decodeHeader(mutated);
        let total = 0;
        for (const t of header.tensors) {
          // What Tensor.empty refuses, the decoder must have refused: a raw RangeError there is the bug.
          expect(() => checkSize(t.shape, t.dtype, 'fuzz')).not.toThrow();
          total += t.shape.reduce((a, b) => a * b, 1) * itemSize(t.dtype);
        }
        expect(total).toBeLessThanOrEqual(DEFAULT_HEADER_LIMITS.maxMessageBytes);
        outcomes.ok++;
      } catch (error) {
        expect(error).toBeInstanceOf(P2PHeaderError);
        outcomes.error++;
      }
    }
    expect(outcomes.error).toBeGreaterThan(5000);
    expect(outcomes.ok).toBeGreaterThan(1000);
  });

  it('a 52-byte header declaring a 64 GiB tensor is refused by the default limit', () => {
    const spec: TensorSpec = { dtype: 'int8', shape: [64 * 2 ** 30], device: 'cpu' };
    const bytes = encodeHeader(MessageKind.message, 0, [spec], serialize(0));
    expect(bytes.length).toBe(52);
    expect(() => decodeHeader(bytes)).toThrow(P2PHeaderError);
    expect(() => decodeHeader(bytes)).toThrow(
      /tensor 0 \(int8\[68719476736\]\) brings the message to 68719476736 bytes, over the limit of 17179869184 \(cluster\.collective\.max_message_bytes\)/,
    );
    expect(DEFAULT_HEADER_LIMITS.maxMessageBytes).toBe(16 * 2 ** 30);
  });

  it('a tensor past what one Tensor may hold is refused even under a raised message limit', () => {
    const spec: TensorSpec = { dtype: 'bool', shape: [2 ** 33], device: 'cpu' };
    const bytes = encodeHeader(MessageKind.message, 0, [spec], serialize(0));
    const limits = { ...DEFAULT_HEADER_LIMITS, maxMessageBytes: 2 ** 40 };
    expect(() => decodeHeader(bytes, limits)).toThrow(P2PHeaderError);
    expect(() => decodeHeader(bytes, limits)).toThrow(/tensor 0: .*8589934592 elements/);
  });

  it('a newer version is named as such', () => {
    const bytes = encodeHeader(MessageKind.message, 0, [], serialize(null));
    bytes[4] = 4;
    expect(() => decodeHeader(bytes)).toThrow(/header version 4 is newer than this build understands \(3\)/);
    bytes[4] = 2;
    expect(() => decodeHeader(bytes)).toThrow(/unknown version 2/);
    expect(DEFAULT_HEADER_LIMITS.maxTensors).toBeGreaterThan(0);
  });
});

describe('p2p skeleton', () => {
  it('puts tensors back in place, keeping shared and cyclic references', () => {
    const t = Tensor.arange(3, 'float32');
    const inner = { t, n: 1 };
    const value: Record<string, unknown> = { a: inner, b: inner, list: [t, 'x'] };
    value.self = value;
    const { skeleton, tensors } = splitValue(value, 'send');
    expect(tensors).toEqual([t, t]);
    const back = fillSkeleton(structuredClone(skeleton), tensors) as typeof value;
    expect(back.self).toBe(back);
    expect(back.a).toBe(back.b);
    expect((back.a as typeof inner).t).toBe(t);
    expect((back.list as unknown[])[0]).toBe(t);
  });

  it('rejects placeholders that are out of range, repeated or missing', () => {
    const t = Tensor.arange(1, 'float32');
    const p = (i: unknown) => ({ [PLACEHOLDER_KEY]: i });
    expect(() => fillSkeleton([p(1)], [t])).toThrow(/placeholder 1 of 1/);
    expect(() => fillSkeleton([p('0')], [t])).toThrow(/placeholder 0 of 1/);
    expect(() => fillSkeleton([p(0), p(0)], [t])).toThrow(/tensor 0 used twice/);
    expect(() => fillSkeleton([], [t])).toThrow(/tensor 0 has no placeholder/);
    expect(() => splitValue({ [PLACEHOLDER_KEY]: 0 }, 'send')).toThrow(TypeError);
  });

  it('refuses nesting deep enough to threaten the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1500; i++) deep = [deep];
    expect(() => splitValue(deep, 'send')).toThrow(/nested deeper than 1000 levels/);
    expect(() => fillSkeleton(deep, [])).toThrow(P2PHeaderError);
  });
});

describe('p2p message limit', () => {
  rankTest(
    'a receiver refuses a message declaring more than its max_message_bytes, before allocating',
    { worldSize: 2, names: ['actor', 'rollout'], config: { collective: { maxMessageBytes: 1024 } } },
    async (ctx) => {
      if (ctx.name === 'actor') {
        // A sender of another config (a larger limit): only the receiver's limit stands in the way.
        const config = { collective: { maxMessageBytes: 1 << 30 } };
        const { name, names, device, manager } = ctx;
        const own = new Collective({ name, names, device, manager, config });
        const g = await own.createCollectiveGroup(['actor', 'rollout']);
        // Nobody takes the tensor: the send of its bytes fails once the receiver left (or, had it stayed, at
        // the timeout), which is all this sender can learn.
        const sent = g.send({ step: 1, w: Tensor.zeros([4096], 'float32') }, { timeoutMs: 1000 });
        await expect(sent).rejects.toThrow(/will never make this call: it left|timed out/i);
        own.close();
        return;
      }
      const g = await ctx.collective.createCollectiveGroup(['actor', 'rollout']);
      const received = g.recv();
      await expect(received).rejects.toThrow(P2PHeaderError);
      await expect(received).rejects.toThrow(
        /recv from worker "actor".*tensor 0 \(float32\[4096\]\) brings the message to 16384 bytes, over the limit of 1024 \(cluster\.collective\.max_message_bytes\)/,
      );
    },
  );

  rankTest(
    'a sender of the same config refuses such a message at once, and its channel stays usable',
    { worldSize: 2, names: ['actor', 'rollout'], config: { collective: { maxMessageBytes: 1024 } } },
    async (ctx) => {
      const g = await ctx.collective.createCollectiveGroup(['actor', 'rollout']);
      if (ctx.name === 'actor') {
        await expect(g.send([Tensor.zeros([200], 'float64')])).rejects.toThrow(
          /send to worker "rollout".*: the message holds 1600 bytes of tensors, over the limit of 1024 \(cluster\.collective\.max_message_bytes\)/,
        );
        await g.send({ w: Tensor.ones([8], 'float32') });
        return;
      }
      const got = (await g.recv()) as { w: Tensor };
      expect(got.w.toArray()).toEqual(Array(8).fill(1));
    },
  );
});
