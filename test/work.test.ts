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

  it('is a Promise: Promise.all and Promise.race take it, and its statics make Works', async () => {
    const w = new Work(later(3));
    expect(w).toBeInstanceOf(Promise);
    expect(await Promise.all([w, Work.resolved(4)])).toEqual([3, 4]);
    expect(await Promise.race([new Work(later(5, 50)), Work.resolved(6)])).toBe(6);
    const made = Work.resolve(8);
    expect(made).toBeInstanceOf(Work);
    expect(await made).toBe(8);
    expect(await new Work<number>((resolve) => resolve(9))).toBe(9);
  });

  it('finally() runs its callback, waits for what it returns, and passes the value on', async () => {
    const order: string[] = [];
    const value = await Work.resolved(1).finally(async () => {
      await later(null, 5);
      order.push('finally');
    });
    order.push('after');
    expect(value).toBe(1);
    expect(order).toEqual(['finally', 'after']);
    const replaced = new TypeError('from finally');
    await expect(
      Work.resolved(1).finally(() => {
        throw replaced;
      }),
    ).rejects.toBe(replaced);
  });

  it('an await takes a Work, settled or pending, as a native promise: no then() call, no extra turn', async () => {
    const settled = Work.resolved('now');
    expect(settled.done()).toBe(true);
    const pending = new Work(later('later'));
    const calls: string[] = [];
    for (const [name, w] of [
      ['settled', settled],
      ['pending', pending],
    ] as const) {
      const then = w.then.bind(w);
      Object.defineProperty(w, 'then', {
        value: (...args: Parameters<typeof then>) => {
          calls.push(name);
          return then(...args);
        },
      });
    }
    expect(await settled).toBe('now');
    expect(await pending).toBe('later');
    expect(calls).toEqual([]);
    // As fast as a native promise: the await resumes in the same turn as one on Promise.resolve().
    const order: string[] = [];
    const work = (async () => {
      await Work.resolved(1);
      order.push('work');
    })();
    const native = (async () => {
      await Promise.resolve(1);
      order.push('native');
    })();
    await Promise.all([work, native]);
    expect(order).toEqual(['work', 'native']);
  });

  it('resolved() of a thenable follows it: not done before it settles, and its failure is caught and kept', async () => {
    const boom = new Error('late');
    const failing = Work.resolved(later(0).then(() => Promise.reject(boom)));
    expect(failing.done()).toBe(false);
    await later(null, 20);
    expect(failing.failed()).toBe(true);
    await expect(failing.wait()).rejects.toBe(boom);
    expect(await Work.resolved(later('value'))).toBe('value');
  });
});
