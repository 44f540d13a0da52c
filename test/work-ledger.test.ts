import { afterEach, describe, expect, it } from 'vitest';
import { internalCalls, Work } from '../src/runtime/work.ts';

const turn = () => new Promise((resolve) => setTimeout(resolve, 0));
const call = <T>(promise: Promise<T>, name = 'allReduce #0') => Work.track(new Work(promise), () => name);

afterEach(() => {
  Work.closeLedger();
});

describe("a rank's ledger of its calls", () => {
  it('names a call still pending when the rank ends', async () => {
    Work.openLedger();
    call(new Promise(() => {}), 'allReduce(float32[4], sum) #3 on group "world"');
    await call(Promise.resolve(1), 'barrier() #4 on group "world"');
    expect(Work.closeLedger()?.message).toMatch(
      /^the rank's main returned while 1 call\(s\) it started were still pending: allReduce\(float32\[4\], sum\) #3 on group "world"; await every Work/,
    );
  });

  it('names a failure nobody looked at, and forgets one somebody did', async () => {
    Work.openLedger();
    call(Promise.reject(new RangeError('src 9 is out of range')), 'broadcast on group "world"');
    const caught = call(Promise.reject(new Error('seen')), 'seen later');
    const polled = call(Promise.reject(new Error('polled')), 'polled');
    await turn();
    caught.catch(() => {});
    expect(polled.failed()).toBe(true);
    expect(Work.closeLedger()?.message).toBe(
      '1 call(s) failed and nobody observed it: broadcast on group "world" failed with RangeError: src 9 is out of range; await each Work, or handle its failure with .catch()',
    );
  });

  it('an await, then, wait or finally counts as looking; a then() whose callback throws does not', async () => {
    Work.openLedger();
    await expect(call(Promise.reject(new Error('awaited')))).rejects.toThrow('awaited');
    await call(Promise.reject(new Error('waited')))
      .wait()
      .catch(() => {});
    call(Promise.resolve()).then(() => {
      throw new Error('thrown in then');
    });
    await turn();
    expect(Work.closeLedger()?.message).toMatch(
      /^1 call\(s\) failed .*: allReduce #0 failed with Error: thrown in then;/,
    );
  });

  it('a call settled as it returned (Work.resolved) is done at once; a then() on it that throws is still reported', async () => {
    Work.openLedger();
    const settled = Work.track(Work.resolved(7), () => 'allReduce #1');
    expect(settled.done()).toBe(true);
    expect(settled.failed()).toBe(false);
    expect(await settled).toBe(7);
    settled.then(() => {
      throw new Error('thrown after a settled call');
    });
    await turn();
    expect(Work.closeLedger()?.message).toMatch(
      /^1 call\(s\) failed .*: allReduce #1 failed with Error: thrown after a settled call;/,
    );
  });

  it('keeps a bounded number of unobserved failures and counts the rest', async () => {
    Work.openLedger();
    for (let i = 0; i < 200; i++) call(Promise.reject(new Error(`e${i}`)), `call ${i}`);
    await turn();
    const message = Work.closeLedger()?.message ?? '';
    expect(message).toMatch(
      /^200 call\(s\) failed and nobody observed it: call 0 failed with Error: e0; call 1 /,
    );
    expect(message).toContain('…');
  });

  it('is silent when every call was seen through, and outside a rank', async () => {
    Work.openLedger();
    await call(Promise.resolve());
    expect(Work.closeLedger()).toBeUndefined();
    call(new Promise(() => {}));
    expect(Work.closeLedger()).toBeUndefined();
  });

  it('leaves out the calls a layer above makes through internalCalls', async () => {
    Work.openLedger();
    class Group {
      // Private fields: the view must call methods and getters on the group itself.
      #pending = new Promise<void>(() => {});
      #size = 2;
      get size() {
        return this.#size;
      }
      send() {
        return call(this.#pending, 'send');
      }
    }
    const inner = internalCalls(new Group());
    inner.send();
    expect(inner.size).toBe(2);
    expect(internalCalls(inner)).toBe(internalCalls(inner));
    expect(Work.closeLedger()).toBeUndefined();
    Work.openLedger();
    new Group().send();
    expect(Work.closeLedger()?.message).toMatch(/still pending: send;/);
  });
});
