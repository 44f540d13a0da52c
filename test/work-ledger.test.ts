// biome-ignore-all lint/nursery/noFloatingPromises: these tests make, on purpose, the mistakes the ledger must catch
import { afterEach, describe, expect, it } from 'vitest';
import { closeLedger, internalCalls, openLedger, trackCall, Work } from '../src/runtime/work.ts';

const turn = () => new Promise((resolve) => setTimeout(resolve, 0));
const call = <T>(promise: Promise<T>, name = 'allReduce #0') => trackCall(new Work(promise), () => name);
const settledCall = <T>(value: T, name = 'allReduce #0') => trackCall(Work.resolved(value), () => name);

afterEach(async () => {
  await closeLedger();
});

describe("a rank's ledger of its calls", () => {
  it('names a call nobody looked at, whether it completed or not', async () => {
    for (const started of [
      () => call(new Promise(() => {}), 'allReduce(float32[4], sum) #3 on group "world"'),
      () => call(Promise.resolve(1), 'allReduce(float32[4], sum) #3 on group "world"'),
      () => settledCall(1, 'allReduce(float32[4], sum) #3 on group "world"'),
    ]) {
      openLedger();
      started();
      await call(Promise.resolve(1), 'barrier() #4 on group "world"');
      await turn();
      expect((await closeLedger())?.message).toBe(
        'the rank\'s main returned without looking at 1 call(s) it started: allReduce(float32[4], sum) #3 on group "world"; ' +
          'await each Work (or chain on it, wait() for it, poll it with done()), or call detach() on one it fires and forgets on purpose',
      );
    }
  });

  it('names a call looked at but still pending when the rank ends', async () => {
    openLedger();
    const pending = call(new Promise(() => {}), 'allReduce(float32[4], sum) #3 on group "world"');
    expect(pending.done()).toBe(false);
    expect((await closeLedger())?.message).toMatch(
      /^the rank's main returned while 1 call\(s\) it started were still pending: allReduce\(float32\[4\], sum\) #3 on group "world"; await every Work/,
    );
  });

  it('counts an await, wait(), done(), failed(), Promise.all and a chained Work as looking', async () => {
    openLedger();
    await call(Promise.resolve(1));
    await settledCall(2);
    await call(Promise.resolve(3)).wait();
    const polled = settledCall(4);
    expect(polled.done()).toBe(true);
    expect(settledCall(5).failed()).toBe(false);
    await Promise.all([call(Promise.resolve(6)), settledCall(7)]);
    await settledCall(8).then((v) => v + 1);
    await call(Promise.resolve(9)).finally(() => {});
    settledCall(10).catch(() => {});
    call(Promise.resolve(11)).then(
      () => {},
      () => {},
    );
    expect(await closeLedger()).toBeUndefined();
  });

  it('owes a look at a Work chained with then(fn) or finally(), as at the call itself', async () => {
    for (const chain of [(w: Work<number>) => w.then(() => {}), (w: Work<number>) => w.finally(() => {})]) {
      openLedger();
      chain(settledCall(1, 'broadcast #2'));
      expect((await closeLedger())?.message).toMatch(
        /^the rank's main returned without looking at 1 call\(s\) it started: the (then|finally)\(\) chained on broadcast #2;/,
      );
    }
  });

  it('gives one verdict for a then() that throws, whether its call was done before main returned or not', async () => {
    const verdicts = new Set<string | undefined>();
    for (const started of [() => settledCall(1), () => call(Promise.resolve(1)), () => call(turn())]) {
      openLedger();
      started().then(() => {
        throw new Error('thrown in then');
      });
      const message = (await closeLedger())?.message;
      verdicts.add(message?.replace(/ \(failed with .*?\)/, ''));
    }
    expect([...verdicts]).toEqual([
      "the rank's main returned without looking at 1 call(s) it started: the then() chained on allReduce #0; " +
        'await each Work (or chain on it, wait() for it, poll it with done()), or call detach() on one it fires and forgets on purpose',
    ]);
  });

  it('names a failure nobody looked at, and forgets one somebody did', async () => {
    openLedger();
    call(Promise.reject(new RangeError('src 9 is out of range')), 'broadcast on group "world"');
    const caught = call(Promise.reject(new Error('seen')), 'seen later');
    const polled = call(Promise.reject(new Error('polled')), 'polled');
    await turn();
    caught.catch(() => {});
    expect(polled.failed()).toBe(true);
    expect((await closeLedger())?.message).toMatch(
      /^the rank's main returned without looking at 1 call\(s\) it started: broadcast on group "world" \(failed with RangeError: src 9 is out of range\);/,
    );
  });

  it('names a failure handler that threw with nobody looking', async () => {
    openLedger();
    await expect(call(Promise.reject(new Error('awaited')))).rejects.toThrow('awaited');
    settledCall(1, 'allReduce #1').then(
      () => {
        throw new Error('thrown by a handler');
      },
      () => {},
    );
    expect((await closeLedger())?.message).toMatch(
      /^1 call\(s\) failed and nobody observed it: allReduce #1 failed with Error: thrown by a handler;/,
    );
  });

  it('keeps a bounded number of unobserved failures and counts the rest', async () => {
    openLedger();
    for (let i = 0; i < 200; i++) {
      call(Promise.reject(new Error(`e${i}`)), `call ${i}`).catch(() => {
        throw new Error(`e${i}`);
      });
    }
    const message = (await closeLedger())?.message ?? '';
    expect(message).toMatch(
      /^200 call\(s\) failed and nobody observed it: call 0 failed with Error: e0; call 1 /,
    );
    expect(message).toContain('…');
  });

  it('keeps only the calls still owing a look, and at most 4,096 of them', async () => {
    openLedger();
    // Awaited calls leave the ledger: were they kept, these would fill it and the 4,096 below would not all count.
    for (let i = 0; i < 20_000; i++) await settledCall(i);
    for (let i = 0; i < 5_000; i++) settledCall(i, `forgotten ${i}`);
    expect((await closeLedger())?.message).toMatch(
      /without looking at 4096 call\(s\) it started: forgotten 0; forgotten 1;/,
    );
  });

  it('tracks calls again once a full ledger has room: the calls that filled it were looked at', async () => {
    openLedger();
    await Promise.all(Array.from({ length: 5_000 }, (_, i) => call(Promise.resolve(i), `allReduce #${i}`)));
    call(Promise.resolve(0), 'forgotten');
    expect((await closeLedger())?.message).toMatch(/without looking at 1 call\(s\) it started: forgotten;/);
  });

  it('counts the looks at a Work shared by calls that completed with the same result', async () => {
    const result = { tensor: 'same' };
    openLedger();
    for (let i = 0; i < 1_000; i++) await settledCall(result, `allReduce #${i}`);
    const a = settledCall(result, 'allReduce #1000');
    const b = settledCall(result, 'allReduce #1001');
    expect(a).toBe(b);
    await b;
    expect((await closeLedger())?.message).toMatch(
      /without looking at 1 call\(s\) it started: 1 of allReduce #1000, allReduce #1001 \(calls that completed with the same result share one Work\);/,
    );
    openLedger();
    const c = settledCall(result, 'allReduce #0');
    await c;
    await c; // a second look at one call does not stand for another's
    settledCall(result, 'allReduce #1');
    expect((await closeLedger())?.message).toMatch(
      /without looking at 1 call\(s\) it started: allReduce #1;/,
    );
  });

  it('lets a detached call go unlooked at, waits for it if pending, and ignores its failure', async () => {
    openLedger();
    settledCall(1).detach();
    call(Promise.reject(new Error('on purpose'))).detach();
    let finished = false;
    call(turn().then(() => (finished = true))).detach();
    expect(await closeLedger()).toBeUndefined();
    expect(finished).toBe(true);
  });

  it('is silent outside a rank', async () => {
    call(new Promise(() => {}));
    expect(await closeLedger()).toBeUndefined();
  });

  it('leaves out the calls a layer above makes through internalCalls', async () => {
    openLedger();
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
    expect(await closeLedger()).toBeUndefined();
    openLedger();
    new Group().send();
    expect((await closeLedger())?.message).toMatch(/without looking at 1 call\(s\) it started: send;/);
  });
});
