import { describe, expect, it } from 'vitest';
import { Work } from '../src/index.ts';

const later = <T>(value: T, ms = 5) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

describe('Work', () => {
  it('reports done() only once settled, and wait()/await give the value', async () => {
    const w = new Work(later(7));
    expect(w.done()).toBe(false);
    expect(await w).toBe(7);
    expect(w.done()).toBe(true);
    expect(w.failed()).toBe(false);
    expect(await w.wait()).toBe(7);
  });

  it('then() returns a Work and adopts a Work its callback returns', async () => {
    const inner = new Work(later('inner', 20));
    const chained = new Work(later(1)).then(() => inner);
    expect(chained).toBeInstanceOf(Work);
    await later(null, 10);
    expect(chained.done()).toBe(false); // still waiting for the returned Work
    expect(await chained).toBe('inner');
  });

  it('rejects with the original error and marks itself failed, without an unhandled rejection', async () => {
    const boom = new TypeError('boom');
    const w = Work.rejected(boom);
    await expect(w.wait()).rejects.toBe(boom);
    expect(w.failed()).toBe(true);
    const thrown = Work.run(() => {
      throw boom;
    });
    await expect(thrown).rejects.toBe(boom);
    expect(await w.catch((e) => (e as Error).message)).toBe('boom');
    let ran = false;
    await expect(
      w.finally(() => {
        ran = true;
      }),
    ).rejects.toBe(boom);
    expect(ran).toBe(true);
  });
});
