/** TensorBufferPool: the fit rule, the 2x rule, budget accounting, eviction order, never waiting. */
import { describe, expect, it } from 'vitest';
import { TensorBufferPool } from '../src/index.ts';

/** Leases then returns buffers of these sizes, so they sit idle in the pool. */
function seeded(maxBytes: number, sizes: number[]): TensorBufferPool {
  const pool = new TensorBufferPool(maxBytes);
  const leases = sizes.map((n) => pool.acquire(n)!);
  for (const l of leases) l.release();
  return pool;
}

describe('TensorBufferPool', () => {
  it('takes the smallest idle buffer that fits when it is at most twice the request', () => {
    const pool = seeded(10_000, [100, 150, 400]);
    const lease = pool.acquire(120)!;
    expect(lease.buffer.byteLength).toBe(150);
    expect(pool.stats()).toMatchObject({ activeBytes: 150, cachedBytes: 500, cached: [100, 400] });
    lease.release();
    expect(pool.stats()).toMatchObject({ activeBytes: 0, cachedBytes: 650, cached: [100, 150, 400] });
  });

  it('allocates exactly when the fitting buffer is more than twice the request and the budget allows', () => {
    const pool = seeded(10_000, [400]);
    const lease = pool.acquire(150)!;
    expect(lease.buffer.byteLength).toBe(150);
    expect(pool.stats()).toMatchObject({ activeBytes: 150, cachedBytes: 400, cached: [400] });
  });

  it('takes an oversized idle buffer when an exact allocation would exceed the budget', () => {
    const pool = seeded(500, [400]);
    const lease = pool.acquire(150)!;
    expect(lease.buffer.byteLength).toBe(400);
    expect(pool.stats()).toMatchObject({ activeBytes: 400, cachedBytes: 0 });
  });

  it('keeps separate lists for repeated sizes', () => {
    const pool = seeded(10_000, [200, 200, 200]);
    expect(pool.stats().cached).toEqual([200, 200, 200]);
    const a = pool.acquire(200)!;
    const b = pool.acquire(200)!;
    expect(a.buffer).not.toBe(b.buffer);
    expect(pool.stats()).toMatchObject({ activeBytes: 400, cachedBytes: 200 });
  });

  it('evicts idle buffers from the largest size bucket down to make room', () => {
    const pool = seeded(1_000, [100, 300, 300, 250]);
    expect(pool.stats().cachedBytes).toBe(950);
    // Nothing idle fits 500: room for it is made by dropping 300, then the other 300 ... until it fits.
    const lease = pool.acquire(500)!;
    expect(lease.buffer.byteLength).toBe(500);
    expect(pool.stats()).toMatchObject({ activeBytes: 500, cachedBytes: 350, cached: [100, 250] });
  });

  it('never waits: answers undefined when active buffers fill the budget, leaving idle ones alone', () => {
    const pool = new TensorBufferPool(1_000);
    const big = pool.acquire(800)!;
    pool.acquire(100)!.release();
    expect(pool.acquire(300)).toBeUndefined();
    expect(pool.stats()).toMatchObject({ activeBytes: 800, cachedBytes: 100 });
    big.release();
    // 800 is over twice 300, but 300 more would pass the budget (900 idle): the idle 800 is reused.
    expect(pool.acquire(300)?.buffer.byteLength).toBe(800);
  });

  it('discard drops a buffer from the budget without caching it; a second give-back is an error', () => {
    const pool = new TensorBufferPool(1_000);
    const lease = pool.acquire(600)!;
    lease.discard();
    expect(pool.stats()).toMatchObject({ activeBytes: 0, cachedBytes: 0, cached: [] });
    expect(() => lease.release()).toThrow(/given back twice/);
    expect(() => pool.acquire(0)).toThrow(/bytes must be a positive integer/);
    expect(() => new TensorBufferPool(-1)).toThrow(/maxBytes must be a positive integer/);
  });
});
