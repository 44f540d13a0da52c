/**
 * ByteRing's short first lap (runtime/byte-ring.ts): a ring larger than
 * FIRST_LAP_BYTES wraps within its first records, so the code of a lap's
 * end runs while V8 still collects type feedback, and it still carries
 * every record intact and fills to its whole size.
 */
import { describe, expect, it } from 'vitest';
import { ByteRing, FIRST_LAP_BYTES, RING_CONTROL_BYTES } from '../src/runtime/byte-ring.ts';

const RING_BYTES = 64 << 10;
/** A mailbox's record of one float32: 4 length bytes and a 40-byte body, 8-aligned. */
const SMALL_BODY = 40;
const SMALL_RECORD = 48;

function pair(dataBytes: number): { producer: ByteRing; consumer: ByteRing } {
  const memory = new SharedArrayBuffer(RING_CONTROL_BYTES + dataBytes);
  return { producer: new ByteRing(memory, 0, dataBytes), consumer: new ByteRing(memory, 0, dataBytes) };
}

describe('ByteRing first lap', () => {
  it('wraps a fresh ring within its first FIRST_LAP_BYTES of records', () => {
    const { producer, consumer } = pair(RING_BYTES);
    const offsets: number[] = [];
    for (let i = 0; i < (2 * FIRST_LAP_BYTES) / SMALL_RECORD; i++) {
      expect(producer.tryWrite([new Uint8Array(SMALL_BODY).fill(i & 0xff)], SMALL_BODY)).toBe(true);
      offsets.push(consumer.peekOffset());
      consumer.release();
    }
    const wrappedAt = offsets.findIndex((at, i) => i > 0 && at < offsets[i - 1]);
    expect(wrappedAt).toBeGreaterThan(0);
    expect(wrappedAt * SMALL_RECORD).toBeLessThanOrEqual(FIRST_LAP_BYTES);
    // After the wrap, records follow from the data's start.
    expect(offsets[wrappedAt]).toBe(4);
  });

  it('fills to its whole size before it refuses, though its first lap is short', () => {
    const { producer, consumer } = pair(RING_BYTES);
    let written = 0;
    while (producer.tryWrite([new Uint8Array(SMALL_BODY)], SMALL_BODY)) written++;
    // All but about a record (a wrap's skipped bytes, the word kept free for the next record), not the first lap's room.
    expect(written * SMALL_RECORD).toBeGreaterThan(RING_BYTES - 2 * SMALL_RECORD);
    consumer.peek();
    consumer.release();
    expect(producer.tryWrite([new Uint8Array(SMALL_BODY)], SMALL_BODY)).toBe(true);
  });

  it('carries records of every length in order across the first lap and many after', () => {
    const { producer, consumer } = pair(RING_BYTES);
    const record = (n: number) => Uint8Array.from({ length: (n * 37) % 3000 }, (_, i) => (n + i) & 0xff);
    let written = 0;
    let read = 0;
    while (read < 4000) {
      const before = written + read;
      while (written < 4000 && producer.tryWrite([record(written)], record(written).length)) written++;
      for (let body = consumer.peek(); body !== undefined; body = consumer.peek()) {
        if (typeof body === 'number') expect.fail(`record ${read} read as a length of ${body}`);
        expect(Buffer.compare(body, record(read)), `record ${read}`).toBe(0);
        consumer.release();
        read++;
      }
      if (written + read === before) expect.fail(`stuck after ${written} written and ${read} read`);
    }
  });

  it('leaves rings of at most FIRST_LAP_BYTES as they were: their first record at the start', () => {
    const { producer, consumer } = pair(FIRST_LAP_BYTES);
    producer.tryWrite([new Uint8Array(8)], 8);
    expect(consumer.peekOffset()).toBe(4);
  });
});
