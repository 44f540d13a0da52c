/**
 * The TensorStore contract: what every store promises its callers (the
 * handshake of src/runtime/tensor-store.ts and its doc comments), as one set
 * of tests each store runs with its own way of making a job's stores (the
 * *.test.ts files beside this one). Calls name both ends (`to`, `from`), as
 * collectives do: stores of one node ignore the names, stores spanning nodes
 * need them. Where stores differ by nature, ContractTraits says how and why,
 * and the suite holds each to its side.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  CollectiveMismatchError,
  CommTimeoutError,
  InvalidStateError,
  RankFailedError,
} from '../../src/runtime/errors.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { handOver, type RankedStore } from '../fixtures/hand-over.ts';
import { expectEveryDtype } from '../fixtures/store-jobs.ts';

export interface ContractTraits {
  /**
   * Whether all ranks' values share one set of keys. Where a key is one place
   * every rank looks in (a slot of MemoryTensorStore's table, a path of the
   * FileTensorStore's file handshake), another rank's srcSet of a key in use
   * is refused. Where values are pushed to the consumers they name (the
   * network store, the file store's rings), a consumer tells them apart by
   * their producer, so two ranks' values of one key are two values.
   */
  sharedKeys: boolean;
}

/** The stores of a new job of `ranks` ranks, rank r's at index r; the suite closes them after each test. */
export type MakeStores = (ranks: number) => Promise<RankedStore[]>;

/** Every job of the suite: a producer, rank 0, and two consumers. */
const RANKS = 3;
/** How long past its timeout a wait may take to fail, on a loaded machine. */
const LATE_MS = 2_000;

type ErrorClass = abstract new (...args: never[]) => Error;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What `promise` rejects with; fails the test if it resolves. */
function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    (value) => expect.fail(`expected a rejection, got ${String(value)}`),
    (error: Error) => error,
  );
}

/** Expects `promise` to reject with an error of class `kind` whose message matches `message`. */
async function expectError(promise: Promise<unknown>, kind: ErrorClass, message: RegExp): Promise<void> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(kind);
  expect(error.message).toMatch(message);
}

/** A get with timeoutMs 0, tried until the value is there (a pushed value takes a moment to arrive). */
async function lookUntilThere(consumer: RankedStore, key: string, from: number): Promise<Tensor> {
  for (const until = performance.now() + 5_000; ; await sleep(2)) {
    try {
      return await consumer.destGet(key, { from, timeoutMs: 0 });
    } catch (error) {
      if (!(error instanceof CommTimeoutError) || performance.now() > until) throw error;
    }
  }
}

export function describeTensorStoreContract(
  name: string,
  makeStores: MakeStores,
  traits: ContractTraits,
): void {
  describe(`TensorStore contract: ${name}`, () => {
    const made: RankedStore[] = [];
    afterEach(() => {
      for (const store of made.splice(0)) store.close();
    });
    const job = async () => {
      const stores = await makeStores(RANKS);
      made.push(...stores);
      return stores;
    };

    it('hands a value with its tag and producer rank to every consumer; the producer waits for all of them', async () => {
      const [p, c1, c2] = await job();
      const early = c1.destGetEntry('x', { from: 0 });
      await sleep(20);
      const value = Tensor.fromArray([1, 2, 3, 4, 5, 6], [2, 3], 'float32');
      await p.srcSet('x', value, 2, { tag: 'allGather float32[2,3]', to: [1, 2] });
      for (const entry of [await early, await c2.destGetEntry('x', { from: 0 })]) {
        expect(entry).toMatchObject({ tag: 'allGather float32[2,3]', producerRank: 0 });
        expect(entry.tensor.shape).toEqual([2, 3]);
        expect(entry.tensor.toArray()).toEqual([1, 2, 3, 4, 5, 6]);
      }
      let finished = false;
      const waiting = p.srcWaitUntilGetFinished('x').then(() => {
        finished = true;
      });
      await c1.destFinishGet('x');
      await sleep(50);
      expect(finished).toBe(false);
      await c2.destFinishGet('x');
      await waiting;
    });

    it('carries every dtype, empty and 0-d tensors, and 16 MiB bit for bit', async () => {
      const [p, , c] = await job();
      await expectEveryDtype((key, value) => handOver(p, c, key, value));
      const empty = await handOver(p, c, 'empty', Tensor.empty([2, 0, 3], 'int64'));
      expect([empty.shape, empty.dtype]).toEqual([[2, 0, 3], 'int64']);
      const scalar = await handOver(p, c, 'scalar', Tensor.full([], 7, 'int32'));
      expect([scalar.shape, scalar.toArray()]).toEqual([[], [7]]);
      const big = Tensor.empty([4 << 20], 'float32');
      const words = big.data as Float32Array;
      for (let i = 0; i < words.length; i += 4099) words[i] = i;
      expect((await handOver(p, c, 'big', big)).equal(big)).toBe(true);
    });

    it('serves a key again once finished, many times over, either way', async () => {
      const [p, c] = await job();
      for (let i = 0; i < 30; i++) {
        const [src, dst] = i % 2 ? [p, c] : [c, p];
        expect((await handOver(src, dst, 'again', Tensor.full([2], i, 'int32'))).toArray()).toEqual([i, i]);
      }
    });

    it('finishes a value for no consumers at once', async () => {
      const [p, c] = await job();
      await p.srcSet('none', Tensor.ones([2]), 0, { to: [] });
      await p.srcWaitUntilGetFinished('none', { timeoutMs: 0 });
      expect((await handOver(p, c, 'none', Tensor.ones([2]))).toArray()).toEqual([1, 1]);
    });

    it("reports a consumer's failure to the producer: a mismatch as CollectiveMismatchError, the key serving again", async () => {
      const [p, c1, c2] = await job();
      const t = Tensor.fromArray([1], [1], 'float32');
      await p.srcSet('e', t, 2, { to: [1, 2] });
      await c1.destGet('e', { from: 0 });
      await c2.destGet('e', { from: 0 });
      await c1.destFinishGet('e', { error: 'rank 1: shapes differ', mismatch: true });
      await c2.destFinishGet('e');
      const mismatch = await rejection(p.srcWaitUntilGetFinished('e'));
      expect(mismatch).toBeInstanceOf(CollectiveMismatchError);
      expect(mismatch.message).toBe('rank 1: shapes differ');

      await p.srcSet('e', t, 1, { to: [2] });
      await c2.destGet('e', { from: 0 });
      await c2.destFinishGet('e', { error: 'rank 2: out of memory' });
      const local = await rejection(p.srcWaitUntilGetFinished('e'));
      expect(local).not.toBeInstanceOf(CollectiveMismatchError);
      expect(local).toBeInstanceOf(RankFailedError);
      expect(local.message).toBe('rank 2: out of memory');
      expect((await handOver(p, c1, 'e', t)).toArray()).toEqual([1]);
    });

    it('times out a get of a key nobody sets with a CommTimeoutError naming the key, within its timeout', async () => {
      const [, c] = await job();
      const started = performance.now();
      const error = await rejection(c.destGet('never', { from: 0, timeoutMs: 100 }));
      const took = performance.now() - started;
      expect(error).toBeInstanceOf(CommTimeoutError);
      expect(error.message).toMatch(/^destGet\("never"\) timed out after 100 ms on rank 1: /);
      expect(took).toBeGreaterThanOrEqual(95);
      expect(took).toBeLessThan(100 + LATE_MS);
    });

    it("times out a producer's wait naming the key and its consumers; the value given up on is not taken for the key's next", async () => {
      const [p, c1, c2] = await job();
      await p.srcSet('slow', Tensor.full([2], 1, 'int32'), 2, { to: [1, 2] });
      await c2.destGet('slow', { from: 0 });
      await c2.destFinishGet('slow');
      const started = performance.now();
      const error = await rejection(p.srcWaitUntilGetFinished('slow', { timeoutMs: 100 }));
      expect(performance.now() - started).toBeLessThan(100 + LATE_MS);
      expect(error).toBeInstanceOf(CommTimeoutError);
      // A store spanning nodes counts the consumers of each medium on its own.
      expect(error.message).toMatch(
        /^srcWaitUntilGetFinished\("slow"\) timed out after 100 ms on rank 0: \d of \d consumers finished/,
      );
      // A store that pushes values sends the withdrawal ahead of later values: once one is taken, it arrived.
      await handOver(p, c1, 'fence', Tensor.ones([1]));
      await p.srcSet('slow', Tensor.full([2], 2, 'int32'), 1, { to: [1] });
      expect((await c1.destGet('slow', { from: 0 })).toArray()).toEqual([2, 2]);
      await c1.destFinishGet('slow');
      await p.srcWaitUntilGetFinished('slow');
    });

    it('looks once with timeoutMs 0: a get claims nothing not there yet, a wait gives up on what is not finished', async () => {
      const [p, c] = await job();
      const started = performance.now();
      await expectError(c.destGet('k', { from: 0, timeoutMs: 0 }), CommTimeoutError, /^destGet\("k"\)/);
      expect(performance.now() - started).toBeLessThan(LATE_MS);
      await p.srcSet('k', Tensor.fromArray([7], [1], 'int32'), 1, { to: [1] });
      expect((await lookUntilThere(c, 'k', 0)).toArray()).toEqual([7]);
      await c.destFinishGet('k');
      await p.srcWaitUntilGetFinished('k');
      await p.srcSet('k', Tensor.fromArray([8], [1], 'int32'), 1, { to: [1] });
      await expectError(
        p.srcWaitUntilGetFinished('k', { timeoutMs: 0 }),
        CommTimeoutError,
        /0 of 1 consumers finished/,
      );
      await handOver(p, c, 'fence', Tensor.ones([1]));
      expect((await handOver(p, c, 'k', Tensor.fromArray([9], [1], 'int32'))).toArray()).toEqual([9]);
    });

    it('refuses bad arguments to srcSet with errors naming the call, and sets nothing', async () => {
      const [p, c] = await job();
      const t = Tensor.arange(4, 'float32');
      const to = [1];
      const cases: Array<[() => Promise<void>, ErrorClass, RegExp]> = [
        [
          () => p.srcSet('k', t.reshape([2, 2]).transpose(0, 1), 1, { to }),
          TypeError,
          /^srcSet\("k"\): tensor float32\[2,2\] is not contiguous .*; call \.contiguous\(\) first$/,
        ],
        [() => p.srcSet('k', [1, 2] as never, 1, { to }), TypeError, /^srcSet\("k"\): expected a Tensor/],
        [
          () => p.srcSet('k', Tensor.zeros(new Array(17).fill(1)), 1, { to }),
          RangeError,
          /^srcSet\("k"\): at most 16 dimensions are supported$/,
        ],
        [
          () => p.srcSet('', t, 1, { to }),
          RangeError,
          /^srcSet\(""\): key must be 1\.\.128 bytes of UTF-8, got 0$/,
        ],
        [
          () => p.srcSet('k'.repeat(129), t, 1, { to }),
          RangeError,
          /: key must be 1\.\.128 bytes of UTF-8, got 129$/,
        ],
        [
          () => p.srcSet('a\ud800b', t, 1, { to }),
          TypeError,
          /^srcSet\("a\\ud800b"\): key is not valid Unicode$/,
        ],
        [
          () => p.srcSet(7 as never, t, 1, { to }),
          TypeError,
          /^srcSet\(7\): key must be a string, got number$/,
        ],
        [
          () => p.srcSet('k', t, -1),
          RangeError,
          /^srcSet\("k"\): consumers must be a non-negative integer, got -1$/,
        ],
        [() => p.srcSet('k', t, 1.5), RangeError, /consumers must be a non-negative integer, got 1\.5$/],
        [
          () => p.srcSet('k', t, 2, { to }),
          RangeError,
          /^srcSet\("k"\): options\.to must list the 2 consumers' ranks, got 1$/,
        ],
        [
          () => p.srcSet('k', t, 1, { to: 1 as never }),
          TypeError,
          /options\.to must list the 1 consumers' ranks/,
        ],
        [
          () => p.srcSet('k', t, 1, { to, tags: 'x' } as never),
          TypeError,
          /^srcSet\("k"\): unknown option "tags" \(did you mean "tag"\?\); known options: tag, to, readInPlace$/,
        ],
      ];
      for (const [call, kind, message] of cases) await expectError(call(), kind, message);
      expect((await handOver(p, c, 'k', t)).toArray()).toEqual([0, 1, 2, 3]);
    });

    it('refuses bad options of gets, waits and finishes, naming the call, before anything else', async () => {
      const [p, c] = await job();
      const cases: Array<[() => Promise<unknown>, ErrorClass, RegExp]> = [
        [
          () => c.destGet('k'.repeat(129), { from: 0 }),
          RangeError,
          /^destGet\("k+"\): key must be 1\.\.128 bytes/,
        ],
        [
          () => c.destGet('a\udc00', { from: 0 }),
          TypeError,
          /^destGet\("a\\udc00"\): key is not valid Unicode$/,
        ],
        [
          () => c.destGet('k', { from: 0, timeout: 5 } as never),
          TypeError,
          /^destGet\("k"\): unknown option "timeout" \(did you mean "timeoutMs"\?\)/,
        ],
        [
          () => c.destGet('k', { from: 0, timeoutMs: -1 }),
          RangeError,
          /^destGet\("k"\): timeoutMs must be a non-negative number, got -1$/,
        ],
        [
          () => c.destGet('k', { from: 0, timeoutMs: Number.NaN }),
          RangeError,
          /timeoutMs must be .*, got NaN$/,
        ],
        [() => c.destGet('k', { from: 0.5 }), RangeError, /^destGet\("k"\): options\.from must be a rank/],
        [
          () => p.srcWaitUntilGetFinished('k', { timeoutMs: -1 }),
          RangeError,
          /^srcWaitUntilGetFinished\("k"\): timeoutMs must be a non-negative number, got -1$/,
        ],
        [
          () => p.srcWaitUntilGetFinished('k', { timeout: 1 } as never),
          TypeError,
          /^srcWaitUntilGetFinished\("k"\): unknown option "timeout"/,
        ],
        [
          () => c.destFinishGet('k', { err: 'x' } as never),
          TypeError,
          /^destFinishGet\("k"\): unknown option "err" \(did you mean "error"\?\)/,
        ],
        [
          () => c.destFinishGet('k', { error: 42 } as never),
          TypeError,
          /^destFinishGet\("k"\): options\.error must be a string, got number$/,
        ],
      ];
      for (const [call, kind, message] of cases) await expectError(call(), kind, message);
      expect((await handOver(p, c, 'k', Tensor.ones([2]))).toArray()).toEqual([1, 1]);
    });

    it('refuses a second srcSet of a key not finished, and a wait or a finish of nothing', async () => {
      const [p, c] = await job();
      const t = Tensor.ones([2]);
      await p.srcSet('a', t, 1, { to: [1] });
      for (const to of [[1], [2]]) {
        await expectError(
          p.srcSet('a', t, 1, { to }),
          InvalidStateError,
          /^srcSet\("a"\): key is already set by this rank and not yet finished$/,
        );
      }
      const none = /^destFinishGet\("a"\): rank 1 has no unfinished destGet of this key$/;
      const unset = /^srcWaitUntilGetFinished\("b"\): rank 0 has not set this key$/;
      await expectError(c.destFinishGet('a'), InvalidStateError, none);
      await expectError(p.srcWaitUntilGetFinished('b'), InvalidStateError, unset);
      await c.destGet('a', { from: 0 });
      await c.destFinishGet('a');
      await p.srcWaitUntilGetFinished('a');
      await expectError(c.destFinishGet('a'), InvalidStateError, none);
      await expectError(p.srcWaitUntilGetFinished('a'), InvalidStateError, /rank 0 has not set this key$/);
    });

    it(
      traits.sharedKeys
        ? "refuses another rank's srcSet of a key in use, naming the rank that holds it"
        : "keeps two ranks' values of one key apart, finishing the oldest get first",
      async () => {
        const [p, c, other] = await job();
        await p.srcSet('k', Tensor.full([1], 0, 'int32'), 1, { to: [1] });
        if (traits.sharedKeys) {
          await expectError(
            other.srcSet('k', Tensor.full([1], 2, 'int32'), 1, { to: [1] }),
            InvalidStateError,
            /^srcSet\("k"\): key is still held by an earlier value \(set by rank 0\) whose consumers have not finished$/,
          );
          await c.destGet('k', { from: 0 });
          await c.destFinishGet('k');
          await p.srcWaitUntilGetFinished('k');
          expect((await handOver(other, c, 'k', Tensor.full([1], 2, 'int32'))).toArray()).toEqual([2]);
          return;
        }
        await other.srcSet('k', Tensor.full([1], 2, 'int32'), 1, { to: [1] });
        expect((await c.destGet('k', { from: 2 })).toArray()).toEqual([2]);
        expect((await c.destGet('k', { from: 0 })).toArray()).toEqual([0]);
        await c.destFinishGet('k');
        await other.srcWaitUntilGetFinished('k', { timeoutMs: 5_000 });
        await c.destFinishGet('k');
        await p.srcWaitUntilGetFinished('k');
      },
    );

    it('keeps keys with slashes, dots, percent signs and non-ASCII apart', async () => {
      const [p, c] = await job();
      const keys = ['a/b', 'a.b', 'a%2Fb', '..', 'é:1>2', 'k😀', 'k'.repeat(128)];
      for (const [i, key] of keys.entries())
        await p.srcSet(key, Tensor.full([1], i, 'int32'), 1, { to: [1] });
      for (const [i, key] of keys.entries()) {
        expect((await c.destGet(key, { from: 0 })).toArray()).toEqual([i]);
        await c.destFinishGet(key);
        await p.srcWaitUntilGetFinished(key);
      }
    });

    it('fails pending waits and later calls once closed, saying the store is closed', async () => {
      const [p, c] = await job();
      const started = performance.now();
      const pendingGet = rejection(c.destGet('never', { from: 0 }));
      await p.srcSet('held', Tensor.ones([3]), 1, { to: [1] });
      const pendingWait = rejection(p.srcWaitUntilGetFinished('held'));
      await sleep(20);
      p.close();
      c.close();
      expect(await pendingGet).toBeInstanceOf(InvalidStateError);
      expect((await pendingGet).message).toMatch(/^destGet\("never"\): the \w+ store of rank 1 is closed$/);
      expect(await pendingWait).toBeInstanceOf(InvalidStateError);
      expect((await pendingWait).message).toMatch(
        /^srcWaitUntilGetFinished\("held"\): the \w+ store of rank 0 is closed$/,
      );
      expect(performance.now() - started).toBeLessThan(LATE_MS);
      await expectError(
        p.srcSet('later', Tensor.ones([1]), 1, { to: [1] }),
        InvalidStateError,
        /^srcSet\("later"\): the \w+ store of rank 0 is closed$/,
      );
      await expectError(
        c.destGet('later', { from: 0 }),
        InvalidStateError,
        /^destGet\("later"\): the \w+ store of rank 1 is closed$/,
      );
    });
  });
}
