import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { crossMemory } from '../src/file-store/cross-memory.ts';
import {
  abortJob,
  defaultStoreRoot,
  FileStoreCorruptError,
  type FileStoreOptions,
  FileTensorStore,
} from '../src/file-store/index.ts';
import { defaultRingBytes, type RingChannelOptions } from '../src/file-store/ring-channels.ts';
import { RingSegment } from '../src/file-store/ring-segment.ts';
import {
  CollectiveMismatchError,
  CommTimeoutError,
  JobFailedError,
  launchProcesses,
  RankFailedError,
  Tensor,
} from '../src/index.ts';
import { ByteRing, RING_CONTROL_BYTES } from '../src/runtime/byte-ring.ts';
import { dtypeCode } from '../src/tensor/dtype.ts';
import type { scenarios } from './fixtures/file-store-rings.ts';
import { handOver } from './fixtures/hand-over.ts';
import { type Launch, scenarioFixture } from './fixtures/scenarios.ts';
import { expectEveryDtype, storeJobs } from './fixtures/store-jobs.ts';

const { newJob, opened } = storeJobs('rings');

/** `count` stores of one job with rings between all of them. */
function ringStores(
  count: number,
  options: Partial<FileStoreOptions> = {},
  rings: Partial<RingChannelOptions> = {},
): FileTensorStore[] {
  const dir = newJob();
  const ranks = Array.from({ length: count }, (_, r) => r);
  const made = ranks.map(
    (rank) => new FileTensorStore({ dir, rank, timeoutMs: 10_000, ...options, rings: { ranks, ...rings } }),
  );
  opened.push(...made);
  return made;
}

const arenaFiles = (dir: string) => readdirSync(join(dir, 'tmp')).filter((name) => name.startsWith('arena.'));
/** Whether this machine lets a process copy out of another's memory (not where seccomp or Yama forbid it). */
const crossMemoryWorks = crossMemory() !== undefined;

/** What the job directory holds besides its layout folders and the stores' ring and arena files. */
function valueFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter(
    (path) => !/^(tmp|claims|done|done\/\d+|tmp\/(rings|bell)\.\d+|tmp\/arena\..*)$/.test(path),
  );
}

describe('ByteRing', () => {
  const ring = (dataBytes: number) =>
    new ByteRing(new ArrayBuffer(RING_CONTROL_BYTES + dataBytes), 0, dataBytes);

  it('carries records of every length in order across many wrap-arounds', () => {
    const r = ring(1024);
    let written = 0;
    let read = 0;
    const record = (n: number) => Uint8Array.from({ length: n % 300 }, (_, i) => (n + i) & 0xff);
    while (read < 2000) {
      while (written < 2000 && r.tryWrite([record(written)], written % 300)) written++;
      for (let body = r.peek(); body !== undefined; body = r.peek()) {
        if (typeof body === 'number') expect.fail(`record ${read} read as a length of ${body}`);
        expect(Buffer.compare(body, record(read)), `record ${read}`).toBe(0);
        r.release();
        read++;
      }
    }
    expect(written).toBe(2000);
  });

  it('refuses a record when full, and one larger than half the ring at all', () => {
    const r = ring(1024);
    expect(r.maxRecordBytes).toBe(500);
    expect(() => r.tryWrite([new Uint8Array(501)], 501)).toThrow(/exceeds 500/);
    expect(r.tryWrite([new Uint8Array(500)], 500)).toBe(true);
    expect(r.tryWrite([new Uint8Array(500)], 500)).toBe(true);
    expect(r.tryWrite([new Uint8Array(16)], 16)).toBe(false);
    r.peek();
    r.release();
    expect(r.tryWrite([new Uint8Array(16)], 16)).toBe(true);
    expect(() => new ByteRing(new ArrayBuffer(4096), 0, 1000)).toThrow(/power of two/);
  });

  it('shows a record assembled in place only once published', () => {
    const memory = new SharedArrayBuffer(RING_CONTROL_BYTES + 1024);
    const producer = new ByteRing(memory, 0, 1024);
    const consumer = new ByteRing(memory, 0, 1024);
    expect(() => producer.publish()).toThrow(/no record was reserved/);
    const at = producer.reserve(3);
    producer.data.set([7, 8, 9], at);
    expect(consumer.hasRecord()).toBe(false);
    expect(consumer.peek()).toBeUndefined();
    producer.publish();
    expect(consumer.hasRecord()).toBe(true);
    expect([...(consumer.peek() as Uint8Array)]).toEqual([7, 8, 9]);
    consumer.release();
    expect(consumer.hasRecord()).toBe(false);
  });

  it('gives a length no record can have back as a number instead of reading past the ring', () => {
    const memory = new ArrayBuffer(RING_CONTROL_BYTES + 1024);
    const r = new ByteRing(memory, 0, 1024);
    r.tryWrite([new Uint8Array(8)], 8);
    // The length word holds the body's bytes + 1.
    new DataView(memory, RING_CONTROL_BYTES).setUint32(0, 901, true);
    expect(r.peek()).toBe(900);
  });
});

describe("RingSegment's parked word", () => {
  it('stays set while any wait sleeps and clears once the last one woke', () => {
    const dir = newJob();
    const owner = RingSegment.create(dir, 0, 1, 16 << 10);
    const writer = RingSegment.open(dir, 0, 1, 16 << 10) as RingSegment;
    try {
      expect(writer.isParked()).toBe(false);
      owner.sleeping();
      owner.sleeping();
      expect(writer.isParked()).toBe(true);
      owner.awake();
      expect(writer.isParked()).toBe(true);
      owner.awake();
      expect(writer.isParked()).toBe(false);
    } finally {
      writer.close();
      owner.close();
    }
  });
});

describe('FileTensorStore rings between the ranks of a node', () => {
  it("gives waits on node regions its doorbells: a park ends when another rank rings this rank's", async () => {
    const [a, b] = ringStores(2);
    const bellsA = a.nodeDoorbells();
    const bellsB = b.nodeDoorbells();
    expect(bellsA && bellsB).toBeDefined();
    const started = performance.now();
    // Parked for up to a minute: only the ring ends it within the test's time.
    const parked = bellsA?.park(60_000);
    setTimeout(() => bellsB?.ring(0), 20);
    await parked;
    expect(performance.now() - started).toBeLessThan(30_000);
    // A store without rings has no doorbells: its waits look every millisecond.
    const alone = new FileTensorStore({ dir: newJob(), rank: 0 });
    opened.push(alone);
    expect(alone.nodeDoorbells()).toBeUndefined();
  });

  it('hands a value to several consumers with its tag and producer, no value file, nothing left after', async () => {
    const [p, c, d] = ringStores(3);
    const t = Tensor.arange(6, 'float32');
    await p.srcSet('v', t, 2, { to: [1, 2], tag: 'allReduce#1' });
    expect(valueFiles(p.dir)).toEqual([]);
    for (const consumer of [c, d]) {
      const entry = await consumer.destGetEntry('v', { from: 0 });
      expect(entry).toMatchObject({ tag: 'allReduce#1', producerRank: 0 });
      expect(entry.tensor.toArray()).toEqual([0, 1, 2, 3, 4, 5]);
    }
    const finished = p.srcWaitUntilGetFinished('v');
    let done = false;
    void finished.then(() => (done = true));
    await c.destFinishGet('v');
    await new Promise((r) => setTimeout(r, 30));
    expect(done).toBe(false);
    await d.destFinishGet('v');
    await finished;
    for (const store of opened.splice(0)) store.close();
    expect(readdirSync(p.dir, { recursive: true })).toEqual(
      expect.not.arrayContaining([expect.stringMatching(/rings|bell|arena/)]),
    );
  });

  // Large values: copied from the producer's memory where the system allows it, else through its arena.
  describe.each([
    { large: 'from the producer memory', crossMemory: true },
    { large: 'through the arena', crossMemory: false },
  ])('large values $large', ({ crossMemory }) => {
    it('carries every dtype, empty and 0-d tensors, and sizes on both sides of the inline limit, bit for bit', async () => {
      const [p, c] = ringStores(2, {}, { crossMemory });
      await expectEveryDtype((key, value) => handOver(p, c, key, value));
      expect((await handOver(p, c, 'empty', Tensor.empty([2, 0, 3], 'int64'))).shape).toEqual([2, 0, 3]);
      expect((await handOver(p, c, 'scalar', Tensor.full([], 7, 'int32'))).toArray()).toEqual([7]);
      // 16 KiB is the most a record carries inline; beyond, the payload goes through the producer's arena.
      for (const bytes of [16380, 16384, 16388, 1 << 20, 16 << 20]) {
        const t = Tensor.empty([bytes / 4], 'int32');
        const words = t.data as Int32Array;
        for (let i = 0; i < words.length; i += 97) words[i] = i ^ bytes;
        expect((await handOver(p, c, `size:${bytes}`, t)).equal(t), `${bytes} bytes`).toBe(true);
      }
      expect(valueFiles(p.dir)).toEqual([]);
      // Copied from the producer's memory, a large value never took a region of an arena.
      expect(arenaFiles(p.dir).length > 0).toBe(!(crossMemory && crossMemoryWorks));
    });

    it('in 16 KiB rings (a node of 64 ranks) carries up to 4 KiB inline, larger values beside the ring', async () => {
      expect(defaultRingBytes(64)).toBe(16 << 10);
      expect(defaultRingBytes(2)).toBe(256 << 10);
      const [p, c] = ringStores(2, {}, { ringBytes: 16 << 10, crossMemory });
      for (const bytes of [4092, 4096, 4100, 8192, 16384, 65536]) {
        const t = Tensor.arange(bytes / 4, 'int32');
        expect((await handOver(p, c, `small-ring:${bytes}`, t)).equal(t), `${bytes} bytes`).toBe(true);
      }
    });

    it('keeps hundreds of values in flight, more than a ring holds, each under its key and in order per key', async () => {
      const [p, c] = ringStores(2, {}, { ringBytes: 64 << 10, crossMemory });
      const count = 400;
      // 400 x 4 KiB is 25 times what the ring holds: the producer queues, the consumer frees room as it reads.
      for (let i = 0; i < count; i++)
        await p.srcSet(`m${i}`, Tensor.full([1024], i, 'int32'), 1, { to: [1] });
      for (let i = count - 1; i >= 0; i--) {
        const got = await c.destGet(`m${i}`, { from: 0 });
        expect((got.data as Int32Array)[1023]).toBe(i);
        await c.destFinishGet(`m${i}`);
      }
      for (let i = 0; i < count; i++) await p.srcWaitUntilGetFinished(`m${i}`);
      // One key again and again, large and small values taking turns: each get takes the next value.
      for (let round = 0; round < 40; round++) {
        const t = Tensor.full([round % 2 === 0 ? 8 : 64 << 10], round, 'int32');
        expect((await handOver(p, c, 'again', t)).equal(t)).toBe(true);
      }
    });

    it('lets a consumer fail the producer: a local error, or a mismatch as CollectiveMismatchError', async () => {
      const [p, c] = ringStores(2, {}, { crossMemory });
      for (const [key, bytes] of [
        ['small', 16],
        ['large', 1 << 20],
      ] as const) {
        await p.srcSet(key, Tensor.zeros([bytes / 4]), 1, { to: [1] });
        await c.destGet(key, { from: 0 });
        await c.destFinishGet(key, { error: 'rank 1: out of patience' });
        await expect(p.srcWaitUntilGetFinished(key)).rejects.toThrow(/^rank 1: out of patience$/);
        await p.srcSet(key, Tensor.zeros([bytes / 4]), 1, { to: [1] });
        await c.destGet(key, { from: 0 });
        await c.destFinishGet(key, { error: 'float32[4] vs int32[4]', mismatch: true });
        const error = await p.srcWaitUntilGetFinished(key).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(CollectiveMismatchError);
        expect((error as Error).message).toBe('float32[4] vs int32[4]');
      }
    });
  });

  it.skipIf(!crossMemoryWorks)(
    'copies a large value straight into the tensor the consumer lands it in',
    async () => {
      const [p, c] = ringStores(2);
      const sent = Tensor.arange(1 << 16, 'float32');
      const into = Tensor.zeros([1 << 16], 'float32');
      c.landIn('landed', into, { from: 0 });
      // Too small to land, or of another size: taken as usual.
      c.landIn('small', Tensor.zeros([4]), { from: 0 });
      await p.srcSet('landed', sent, 1, { to: [1] });
      const got = await c.destGet('landed', { from: 0 });
      expect(got.data.buffer).toBe(into.data.buffer);
      expect(into.equal(sent)).toBe(true);
      await c.destFinishGet('landed');
      await p.srcWaitUntilGetFinished('landed');
      // A wish that no value met is forgotten: the next value under the key goes to a buffer of the store's.
      const forget = c.landIn('unmet', into, { from: 0 });
      forget();
      await p.srcSet('unmet', Tensor.full([1 << 16], 2), 1, { to: [1] });
      expect((await c.destGet('unmet', { from: 0 })).data.buffer).not.toBe(into.data.buffer);
      await c.destFinishGet('unmet');
      await p.srcWaitUntilGetFinished('unmet');
    },
  );

  it.skipIf(!crossMemoryWorks)(
    'lends a value its consumers read in place from the arena, not for them to copy out of the producer',
    async () => {
      const [p, c] = ringStores(2, { arenaBytes: 1 << 20 });
      const sent = Tensor.arange(1 << 16, 'float32');
      await p.srcSet('operand', sent, 1, { to: [1], readInPlace: true });
      const got = await c.destGet('operand', { from: 0 });
      expect(got.equal(sent)).toBe(true);
      // A view of the producer's 1 MiB arena file, not a buffer of the value's size.
      expect(got.data.buffer.byteLength).toBe(1 << 20);
      expect(arenaFiles(p.dir)).toHaveLength(1);
      await c.destFinishGet('operand');
      await p.srcWaitUntilGetFinished('operand');
      // The same value for a consumer that may land it is copied out of the producer's memory.
      await p.srcSet('landable', sent, 1, { to: [1] });
      const copied = await c.destGet('landable', { from: 0 });
      expect(copied.data.buffer.byteLength).toBe(sent.nbytes);
      expect(copied.equal(sent)).toBe(true);
      await c.destFinishGet('landable');
      await p.srcWaitUntilGetFinished('landable');
      expect(valueFiles(p.dir)).toEqual([]);
    },
  );

  it.skipIf(!crossMemoryWorks)(
    'copies a value read in place out of the producer when its arenas may not take it, never into a value file',
    async () => {
      const [p, c] = ringStores(2, { maxArenaBytes: 0 });
      const sent = Tensor.arange(1 << 16, 'int32');
      await p.srcSet('operand', sent, 1, { to: [1], readInPlace: true });
      const got = await c.destGet('operand', { from: 0 });
      expect(got.data.buffer.byteLength).toBe(sent.nbytes);
      expect(got.equal(sent)).toBe(true);
      await c.destFinishGet('operand');
      await p.srcWaitUntilGetFinished('operand');
      expect(valueFiles(p.dir)).toEqual([]);
      expect(arenaFiles(p.dir)).toEqual([]);
    },
  );

  it.skipIf(!crossMemoryWorks)(
    'a value that cannot be copied from its producer fails the get, naming it and the errno',
    async () => {
      const [p, c] = ringStores(2);
      const intruder = RingSegment.open(p.dir, 1, 1, defaultRingBytes(2)) as RingSegment;
      // A remote value record of a float32[8192] with key "k" at address 8, where nothing is mapped.
      const record = new Uint8Array(11 + 8 + 1 + 12);
      const view = new DataView(record.buffer);
      view.setUint8(0, 6);
      view.setUint32(1, 77, true);
      view.setUint8(5, dtypeCode('float32'));
      view.setUint8(6, 1);
      view.setUint16(7, 1, true);
      view.setFloat64(11, 8192, true);
      record[19] = 'k'.charCodeAt(0);
      view.setUint32(20, process.pid, true);
      view.setFloat64(24, 8, true);
      intruder.rings[0].tryWrite([record], record.length);
      intruder.close();
      const error = await c.destGet('k', { from: 0 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RankFailedError);
      expect((error as Error).message).toMatch(
        /^rank 1 could not copy the value of key "k" from rank 0: reading 32768 bytes of process \d+ with process_vm_readv failed \(EFAULT\)/,
      );
    },
  );

  it('keeps at most maxBufferedBytes of values not taken, reading more as they are taken', async () => {
    const [p, c] = ringStores(2, {}, { maxBufferedBytes: 64 << 10, ringBytes: 64 << 10 });
    // 200 values of 1 KiB: three times what the consumer keeps, and more than the ring holds.
    for (let i = 0; i < 200; i++) await p.srcSet(`v${i}`, Tensor.full([256], i, 'int32'), 1, { to: [1] });
    const last = await c.destGet('v199', { from: 0, timeoutMs: 50 }).catch((e: unknown) => e);
    expect(last).toBeInstanceOf(CommTimeoutError);
    expect((last as Error).message).toMatch(
      /rank 0 has not sent a value under this key that this rank read: it holds \d+ values not taken yet \(\d+ bytes, its limit of maxBufferedBytes\)/,
    );
    for (let i = 0; i < 200; i++) {
      expect((await c.destGet(`v${i}`, { from: 0 })).toArray()[0]).toBe(i);
      await c.destFinishGet(`v${i}`);
    }
    for (let i = 0; i < 200; i++) await p.srcWaitUntilGetFinished(`v${i}`);
  });

  it('lets go of a value it carried inside its records without waiting for the finishes (srcRelease)', async () => {
    const [p, c, d] = ringStores(3);
    await p.srcSet('small', Tensor.full([4], 1), 2, { to: [1, 2] });
    expect(p.srcRelease('small')).toBe(true);
    // Released, the key takes its next value at once; consumers take both in order.
    await p.srcSet('small', Tensor.full([4], 2), 2, { to: [1, 2] });
    expect(p.srcRelease('small')).toBe(true);
    for (const consumer of [c, d]) {
      for (const expected of [1, 2]) {
        expect((await consumer.destGet('small', { from: 0 })).toArray()).toEqual([
          expected,
          expected,
          expected,
          expected,
        ]);
        await consumer.destFinishGet('small', { error: 'nobody hears this' });
      }
    }
    // A value its consumers read from the producer's memory or arena is waited for as usual.
    await p.srcSet('large', Tensor.zeros([1 << 16]), 1, { to: [1] });
    expect(p.srcRelease('large')).toBe(false);
    await c.destGet('large', { from: 0 });
    await c.destFinishGet('large');
    await p.srcWaitUntilGetFinished('large');
    expect(p.srcRelease('unknown')).toBe(false);
  });

  it('times out naming who waits for whom; a withdrawn value is never taken for the next one', async () => {
    const [p, c, d] = ringStores(3);
    const never = await c.destGet('never', { from: 0, timeoutMs: 50 }).catch((e: unknown) => e);
    expect(never).toBeInstanceOf(CommTimeoutError);
    expect((never as Error).message).toBe(
      'destGet("never") timed out after 50 ms on rank 1: rank 0 has not sent a value under this key',
    );
    await p.srcSet('slow', Tensor.full([2], 1), 2, { to: [1, 2] });
    await d.destGet('slow', { from: 0 });
    await d.destFinishGet('slow');
    const slow = await p.srcWaitUntilGetFinished('slow', { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(slow).toBeInstanceOf(CommTimeoutError);
    expect((slow as Error).message).toBe(
      'srcWaitUntilGetFinished("slow") timed out after 50 ms on rank 0: 1 of 2 consumers finished; waiting for rank 1',
    );
    await p.srcSet('slow', Tensor.full([2], 2), 1, { to: [1] });
    expect((await c.destGet('slow', { from: 0 })).toArray()).toEqual([2, 2]);
    await c.destFinishGet('slow');
    await p.srcWaitUntilGetFinished('slow');
    // A look with timeout 0 takes nothing that is not there yet.
    await expect(c.destGet('later', { from: 0, timeoutMs: 0 })).rejects.toBeInstanceOf(CommTimeoutError);
  });

  it('wakes a sleeping consumer and a sleeping producer by doorbell, not by the fallback poll', async () => {
    const [producer, consumer] = ringStores(2, { pollMs: 60_000 });
    for (const elements of [1, 1 << 18]) {
      const pending = consumer.destGet('later', { from: 0 });
      await new Promise((r) => setTimeout(r, 50));
      await producer.srcSet('later', Tensor.ones([elements]), 1, { to: [1] });
      await pending;
      const finished = producer.srcWaitUntilGetFinished('later');
      await new Promise((r) => setTimeout(r, 50));
      await consumer.destFinishGet('later');
      await finished;
    }
  }, 20_000);

  it('keeps the file handshake for values that do not name both ends, side by side with ring values', async () => {
    const [p, c] = ringStores(2);
    await p.srcSet('promise', Tensor.full([3], 5, 'int32'), 1);
    await p.srcSet('ring', Tensor.full([3], 6, 'int32'), 1, { to: [1] });
    expect(valueFiles(p.dir)).toEqual(['v.promise']);
    expect((await c.destGet('promise', { from: 0, pull: true })).toArray()).toEqual([5, 5, 5]);
    expect((await c.destGet('ring', { from: 0 })).toArray()).toEqual([6, 6, 6]);
    expect(p.claimed('promise')).toBe(true);
    await c.destFinishGet('promise');
    await c.destFinishGet('ring');
    await p.srcWaitUntilGetFinished('promise');
    await p.srcWaitUntilGetFinished('ring');
    expect(valueFiles(p.dir)).toEqual([]);
  });

  it('puts a value the arenas cannot hold in a value file and announces it through the ring', async () => {
    const [p, c] = ringStores(2, { maxArenaBytes: 0 }, { crossMemory: false });
    const t = Tensor.arange(1 << 18, 'float32');
    await p.srcSet('big', t, 1, { to: [1] });
    expect(valueFiles(p.dir)).toEqual(['v.big']);
    expect((await c.destGet('big', { from: 0 })).equal(t)).toBe(true);
    await c.destFinishGet('big', { error: 'rank 1: no thanks' });
    await expect(p.srcWaitUntilGetFinished('big')).rejects.toThrow(/^rank 1: no thanks$/);
    expect(valueFiles(p.dir)).toEqual([]);
  });

  it('wakes waits on the rings with RankFailedError when the job is aborted', async () => {
    const [p, c] = ringStores(2);
    await p.srcSet('held', Tensor.ones([2]), 1, { to: [1] });
    const waits = [p.srcWaitUntilGetFinished('held'), c.destGet('never', { from: 0 })].map((w) =>
      w.catch((e: unknown) => e),
    );
    await new Promise((r) => setTimeout(r, 50));
    abortJob(p.dir, { message: 'rank 0 (rank-0) was killed by SIGKILL', failedRank: 0 });
    for (const error of await Promise.all(waits)) {
      expect(error).toBeInstanceOf(RankFailedError);
      expect(error).toMatchObject({ message: 'rank 0 (rank-0) was killed by SIGKILL', failedRank: 0 });
    }
  });

  it('rejects pending waits when closed and withdraws what it published', async () => {
    const [p, c] = ringStores(2);
    await p.srcSet('mine', Tensor.ones([3]), 1, { to: [1] });
    const pending = p.destGet('other', { from: 1 }).catch((e: unknown) => e);
    p.close();
    expect(((await pending) as Error).message).toMatch(
      /destGet\("other"\): the file store of rank 0 is closed/,
    );
    await expect(c.destGet('mine', { from: 0, timeoutMs: 100 })).rejects.toThrow(/rank 0 has not sent/);
  });

  it('fails only the waits on a producer whose ring holds a record that cannot be one, naming both ranks', async () => {
    const [p, c, d] = ringStores(3);
    const ringBytes = defaultRingBytes(3);
    const intruder = RingSegment.open(p.dir, 2, 2, ringBytes) as RingSegment;
    // Rank 0 writes the first ring of rank 2's inbox.
    intruder.rings[0].tryWrite([Uint8Array.from([99, 0, 0, 0, 0, 0])], 6);
    intruder.close();
    const error = await d.destGet('x', { from: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RankFailedError);
    expect((error as Error).message).toBe(
      'destGet("x") on rank 2: the ring from rank 0 to rank 2 is corrupt: unknown record type 99',
    );
    // Rank 1's values reach rank 2 as before.
    expect((await handOver(c, d, 'fine', Tensor.full([1], 3))).toArray()).toEqual([3]);
    // A peer that counts the node's ranks or sizes rings otherwise is refused by the header.
    const otherwise = () => RingSegment.open(p.dir, 2, 1, ringBytes * 2);
    expect(otherwise).toThrow(FileStoreCorruptError);
    expect(otherwise).toThrow(/rings\.2 is corrupt or from another version: its header holds \[/);
  });

  it('refuses a ring set that leaves this rank out, and a second store of one rank', () => {
    const dir = newJob();
    expect(() => new FileTensorStore({ dir, rank: 3, rings: { ranks: [0, 1] } })).toThrow(
      /rings\.ranks \[0,1\] must include this rank \(3\)/,
    );
    opened.push(new FileTensorStore({ dir, rank: 0, rings: { ranks: [0, 1] } }));
    expect(() => new FileTensorStore({ dir, rank: 0, rings: { ranks: [0, 1] } })).toThrow(
      /another store of rank 0 uses this job directory/,
    );
  });
});

describe('FileTensorStore rings between processes', () => {
  const fixture = scenarioFixture<typeof scenarios>(
    new URL('./fixtures/file-store-rings.ts', import.meta.url),
  );
  const quiet = () => {};

  it('keeps small and large messages interleaved, many in flight, in order and intact; large allReduces exact', async () => {
    const launch: Launch = (entry, args) => launchProcesses(entry, { nproc: 2, args, output: quiet });
    const results = await fixture.runSteps(['interleaved', 'large-allreduce'], launch, { messages: 300 });
    const [sender, receiver] = results.interleaved;
    expect(sender).toBe('sent');
    expect(receiver).toEqual({ received: 300, wrong: [] });
    expect(results['large-allreduce']).toEqual([[], []]);
  });

  it('three processes allReduce large tensors exactly', async () => {
    const launch: Launch = (entry, args) => launchProcesses(entry, { nproc: 3, args, output: quiet });
    expect(await fixture.run('large-allreduce', launch)).toEqual([[], [], []]);
  });

  it('a rank killed by SIGKILL with half a record in its peer ring fails the peer naming it, nothing read', async () => {
    const before = readdirSync(defaultStoreRoot()).filter((n) => n.includes(`-${process.pid}-`));
    const launch: Launch = (entry, args) =>
      launchProcesses(entry, { nproc: 2, args, collectiveTimeoutMs: 60_000, output: quiet });
    const error = await fixture.run('killed-mid-record', launch).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures } = error as JobFailedError;
    expect(failures[0]).toMatchObject({ rank: 1 });
    expect(failures[0].error.message).toMatch(/rank 1 \(rank-1\) was killed by SIGKILL/);
    // Rank 0 was woken by the abort, naming rank 1: not by a corrupt record, not at the timeout.
    expect(failures[1].rank).toBe(0);
    expect(failures[1].error.name).toBe(RankFailedError.name);
    expect(failures[1].error.message).toContain('rank 1 (rank-1)');
    expect(failures[1].error.message).not.toMatch(/corrupt/);
    expect(readdirSync(defaultStoreRoot()).filter((n) => n.includes(`-${process.pid}-`))).toEqual(before);
  });
});
