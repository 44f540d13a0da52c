import { describe, expect, it } from 'vitest';
import { createTensorPromise, MemoryTensorStore, spawnThreads, Tensor } from '../src/index.ts';

describe('TensorPromise / TensorFuture', () => {
  it('work within one thread on an explicit store', async () => {
    const store = new MemoryTensorStore(MemoryTensorStore.createShared(), { rank: 5 });
    try {
      const { promise, future } = createTensorPromise(store);
      expect(future.producerRank).toBe(5);
      expect(await future.ready()).toBe(false);
      const delivery = promise.setValue(Tensor.fromArray([1, 2, 3]));
      // setValue publishes the value, then the ready flag: one turn of the event loop.
      await new Promise((turn) => setImmediate(turn));
      expect(await future.ready()).toBe(true);
      expect((await future.get()).toArray()).toEqual([1, 2, 3]);
      await delivery;
      expect(store.slotsInUse()).toBe(0);
      expect(() => createTensorPromise()).toThrow(
        'createTensorPromise: no rank context is current here; pass a TensorStore',
      );
    } finally {
      store.close();
    }
  });

  it('cross ranks: forwarded handles, producer errors, misuse and timeouts are clear', async () => {
    // biome-ignore lint/suspicious/noExplicitAny: the fixture returns one record per rank
    const [r0, r1, r2] = await spawnThreads<any>(new URL('./fixtures/promise-future.ts', import.meta.url), {
      worldSize: 3,
      collectiveTimeoutMs: 20_000,
    });
    const key = /"tp:0:[0-9a-f-]{36}"/.source;
    expect(r0.handedOff).toMatch(
      new RegExp(
        `^InvalidStateError: TensorFuture.get\\(${key}\\): this future was handed off with handle\\(\\)`,
      ),
    );
    expect(r2.readyBefore).toBe(false);
    expect(r2.value).toBe(true);
    expect(r0.producerRank).toBe(0);
    expect(r2.futureProducer).toBe(0);
    expect(r0.setTwice).toMatch(
      new RegExp(`^InvalidStateError: TensorPromise.setValue\\(${key}\\): the promise was already settled`),
    );
    expect(r0.setErrorAfter).toMatch(
      /^InvalidStateError: TensorPromise.setError\(.*\): the promise was already settled/,
    );
    expect(r2.secondGet).toMatch(
      new RegExp(
        `^InvalidStateError: TensorFuture.get\\(${key}\\): the value was already delivered and released`,
      ),
    );
    expect(r2.readyAfter).toMatch(
      /^InvalidStateError: TensorFuture.ready\(.*\): the value was already delivered/,
    );

    expect(r0.producerError).toMatch(
      /^RankFailedError: TensorFuture.get\("tp:1:[0-9a-f-]+"\): producer rank 1 failed: RangeError: bad batch$/,
    );
    expect(r2.getTimeout).toMatch(
      /^CommTimeoutError: TensorFuture.get: no value under "tp:2:[0-9a-f-]+" from producer rank 2 within 100 ms/,
    );
    expect(r2.readyUnset).toBe(false);
    expect(r2.setTimeout).toMatch(
      /^CommTimeoutError: TensorPromise.setValue\("tp:2:[0-9a-f-]+"\): no holder of the future took the value within 100 ms$/,
    );
    expect(r2.notContiguous).toMatch(
      /^TypeError: TensorPromise.setValue\(.*\): tensor float32\[3,2\] is not contiguous.*call \.contiguous\(\)/,
    );
    expect(r2.badHandle).toBe(
      'TypeError: TensorFuture.fromHandle: expected a handle from future.handle(), got an object (Object)',
    );

    expect(r1.readyOnArrival).toBe(true);
    expect(r1.small).toEqual([1, 2, 3]);
    for (const r of [r0, r1, r2]) expect(r.slotsInUse).toBe(0);
  });
});
