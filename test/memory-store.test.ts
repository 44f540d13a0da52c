import { beforeAll, describe, expect, it } from 'vitest';
import { MemoryTensorStore, spawnThreads, Tensor } from '../src/index.ts';
import type { scenarios } from './fixtures/memory-store.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/memory-store.ts', import.meta.url));
const ranks = (worldSize: number) => (entry: URL, args: object) => spawnThreads(entry, { worldSize, args });

/** The two-rank scenarios run in one job, one after the other, each on keys of its own. */
let two: Awaited<ReturnType<typeof runTwo>>;
const runTwo = () => fixture.runSteps(['zero-copy', 'unshared', 'views', 'reuse'], ranks(2));
beforeAll(async () => {
  two = await runTwo();
}, 120_000); // one job standing for four tests of 60 s each

describe('MemoryTensorStore', () => {
  it('hands a consumer a zero-copy view of the producer’s 64 MiB tensor', () => {
    const [producer, consumer] = two['zero-copy'] as [{ after: number }, Record<string, number | boolean>];
    expect(consumer).toMatchObject({ first: 42, shared: true, numel: 16 << 20 });
    // The consumer's write reached the producer's tensor: the view is its memory, not a copy.
    // (That destGet costs the same at any size is a bench figure, not a timed test.)
    expect(producer.after).toBe(7);
  });

  it('stages a tensor that is not backed by a SharedArrayBuffer', () => {
    expect(two.unshared).toEqual(['sent', 5 * (1 << 18)]);
  });

  it('lends several tensors as one value of views, and refuses to read a value as the other kind', () => {
    const [producer, consumer] = two.views as Array<Record<string, unknown>>;
    expect(consumer).toMatchObject({
      tag: 'views',
      producer: 0,
      sizes: ['uint8[1048576]', 'uint8[16]', 'uint8[12]', 'uint8[0]'],
      part: [0, 0, 128, 65], // float32 16 as little-endian bytes: arange's element 16 starts at byte 64
      partAliases: true,
      plain: [7, 8, 9],
      empty: 0,
    });
    expect(producer.first).toBe(42);
    const asOne =
      /CollectiveMismatchError: rank 1: destGet\("as-one"\): the value under this key is a list of views/;
    const asList =
      /CollectiveMismatchError: rank 1: destGetViews\("as-list"\): the value under this key is one tensor/;
    expect(consumer.asOne).toMatch(asOne);
    expect(consumer.asList).toMatch(asList);
    expect(producer.asOne).toMatch(
      /rank 1: destGet\("as-one"\): the value under this key is a list of views/,
    );
    expect(producer.asList).toMatch(/rank 1: destGetViews\("as-list"\)/);
  });

  it('reuses a finished key and reports a consumer’s error to the producer', () => {
    expect(two.reuse).toEqual(['consumer saw garbage', 'reported']);
  });

  it('lets one rank take every get of a value, then waits for the next value rather than read it again', async () => {
    const store = new MemoryTensorStore();
    try {
      const t = Tensor.arange(4, 'float32');
      await store.srcSet('a', t, 2);
      await store.destGet('a');
      await store.destGet('a');
      await expect(store.destGet('a', { timeoutMs: 50 })).rejects.toThrow(
        /^destGet\("a"\) timed out after 50 ms on rank 0: the value under this key was already got by all its consumers/,
      );
      await store.destFinishGet('a');
      await store.destFinishGet('a');
      await store.srcWaitUntilGetFinished('a');
    } finally {
      store.close();
    }
  });

  it('lends a views value in one slot, and refuses a list that is not of tensors', async () => {
    const store = new MemoryTensorStore();
    try {
      // A views value takes one slot however many tensors it lists, and gives it (and its staging) back.
      const many = Array.from({ length: 300 }, (_, i) => Tensor.full([i + 1], i, 'int16'));
      await store.srcSetViews('m', many, 1);
      expect(store.slotsInUse()).toBe(1);
      const { views } = await store.destGetViews('m');
      expect(views.map((v) => v.nbytes)).toEqual(many.map((m) => m.nbytes));
      expect(new Int16Array(views[299].buffer!, views[299].byteOffset, 300)[299]).toBe(299);
      await store.destFinishGet('m');
      await store.srcWaitUntilGetFinished('m');
      expect(store.slotsInUse()).toBe(0);
      await expect(store.srcSetViews('d', [Tensor.zeros([2]), 'x' as never], 1)).rejects.toThrow(
        /srcSetViews\("d"\): tensors\[1\]/,
      );
      await expect(store.srcSetViews('d', Tensor.zeros([2]) as never, 1)).rejects.toThrow(
        /tensors must be an array of Tensors/,
      );
    } finally {
      store.close();
    }
  });
});
