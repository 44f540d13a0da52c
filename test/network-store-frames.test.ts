/** The network store's frame decoder under malformed and hostile input: a seeded fuzz plus targeted size attacks. */
import { describe, expect, it } from 'vitest';
import { Tensor } from '../src/index.ts';
import { NetworkStoreFrameError } from '../src/network-store/errors.ts';
import {
  decodeFrame,
  Frame,
  fatalFrame,
  finishedFrame,
  MAX_STATUS_BYTES,
  statusHeaderFrame,
  valueHeaderFrame,
  wantFrame,
  withdrawFrame,
} from '../src/network-store/wire.ts';
import { FrameWriter } from '../src/rendezvous/protocol.ts';
import { DTYPES, itemSize } from '../src/tensor/dtype.ts';
import { mulberry32 } from './fixtures/mulberry32.ts';

const int = (rnd: () => number, n: number) => Math.floor(rnd() * n);
const MAX_VALUE_BYTES = 1 << 20;
const bodyOf = (frame: Buffer) => frame.subarray(4);
const encoder = new TextEncoder();

/** A well-formed frame of a random type, as a peer that follows the protocol writes it. */
function drawFrame(rnd: () => number): Buffer {
  const key = `k${int(rnd, 1000)}`;
  switch (int(rnd, 6)) {
    case 0: {
      const shape = Array.from({ length: int(rnd, 4) }, () => int(rnd, 6));
      const tensor = Tensor.zeros(shape, DTYPES[int(rnd, DTYPES.length)]);
      return valueHeaderFrame(int(rnd, 1e6), key, encoder.encode(rnd() < 0.5 ? '' : 'tag'), tensor);
    }
    case 1:
      return finishedFrame(int(rnd, 1e6), rnd() < 0.5 ? {} : { error: 'boom', mismatch: rnd() < 0.5 });
    case 2:
      return statusHeaderFrame(int(rnd, MAX_STATUS_BYTES));
    case 3:
      return wantFrame(key);
    case 4:
      return withdrawFrame(int(rnd, 1e6));
    default:
      return fatalFrame('going away');
  }
}

/** A decoded frame must be bounded; anything else must be a NetworkStoreFrameError. */
function expectCleanOutcome(body: Buffer): 'ok' | 'error' {
  try {
    const frame = decodeFrame(body, MAX_VALUE_BYTES);
    if (frame.type === 'value') {
      const { shape, dtype, nbytes } = frame.header;
      expect(nbytes).toBeLessThanOrEqual(MAX_VALUE_BYTES);
      expect(nbytes).toBe(shape.reduce((a, b) => a * b, 1) * itemSize(dtype));
    }
    if (frame.type === 'status') expect(frame.nbytes).toBeLessThanOrEqual(MAX_STATUS_BYTES);
    return 'ok';
  } catch (error) {
    expect(error).toBeInstanceOf(NetworkStoreFrameError);
    return 'error';
  }
}

describe('network-store frame decoder', () => {
  it('decodes what the encoders write', () => {
    const tensor = Tensor.zeros([2, 3], 'int16');
    const value = decodeFrame(bodyOf(valueHeaderFrame(7, 'w', encoder.encode('t'), tensor)), MAX_VALUE_BYTES);
    expect(value).toEqual({
      type: 'value',
      header: { id: 7, key: 'w', tag: 't', dtype: 'int16', shape: [2, 3], nbytes: 12 },
    });
    expect(decodeFrame(bodyOf(finishedFrame(3, { error: 'x', mismatch: true })), 0)).toEqual({
      type: 'finished',
      finished: { id: 3, failure: { error: 'x', mismatch: true } },
    });
    expect(decodeFrame(bodyOf(statusHeaderFrame(10)), 0)).toEqual({ type: 'status', nbytes: 10 });
    expect(decodeFrame(bodyOf(wantFrame('k')), 0)).toEqual({ type: 'want', key: 'k' });
    expect(decodeFrame(bodyOf(withdrawFrame(4)), 0)).toEqual({ type: 'withdraw', id: 4 });
    expect(decodeFrame(bodyOf(fatalFrame('bye')), 0)).toEqual({ type: 'fatal', message: 'bye' });
  });

  it('fuzz: 30,000 truncated, bit-flipped, overwritten or random bodies give a NetworkStoreFrameError or a bounded frame', () => {
    const rnd = mulberry32(4096);
    const outcomes = { ok: 0, error: 0 };
    for (let i = 0; i < 30_000; i++) {
      let body: Buffer;
      if (rnd() < 0.1) {
        body = Buffer.from(Array.from({ length: 1 + int(rnd, 64) }, () => int(rnd, 256)));
        body[0] = 1 + int(rnd, 10);
      } else {
        const whole = bodyOf(drawFrame(rnd));
        body = Buffer.from(whole.subarray(0, rnd() < 0.3 ? 1 + int(rnd, whole.length) : whole.length));
        for (let f = int(rnd, 4); f > 0; f--) {
          const at = int(rnd, body.length);
          if (rnd() < 0.5) body[at] ^= 1 << int(rnd, 8);
          else body[at] = int(rnd, 256);
        }
      }
      outcomes[expectCleanOutcome(body)]++;
    }
    expect(outcomes.error).toBeGreaterThan(10_000);
    expect(outcomes.ok).toBeGreaterThan(1000);
  });

  it('a value header declaring 64 GiB, or a status row over its bound, is refused by the decoder', () => {
    const huge = 64 * 2 ** 30;
    const value = new FrameWriter(Frame.value).u32(1).key('huge').bytes(new Uint8Array()).u8(8).u8(1);
    const body = bodyOf(value.f64(huge).f64(huge).finish());
    expect(body.length).toBeLessThan(40);
    expect(() => decodeFrame(body, MAX_VALUE_BYTES)).toThrow(NetworkStoreFrameError);
    expect(() => decodeFrame(body, MAX_VALUE_BYTES)).toThrow(
      /value of key "huge" has 68719476736 bytes, over this rank's maxValueBytes 1048576/,
    );
    const status = bodyOf(new FrameWriter(Frame.status).u32(MAX_STATUS_BYTES + 1).finish());
    expect(() => decodeFrame(status, MAX_VALUE_BYTES)).toThrow(NetworkStoreFrameError);
    expect(() => decodeFrame(Buffer.from([42]), MAX_VALUE_BYTES)).toThrow(/unexpected frame type 42/);
  });
});
