import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { AbortWord } from '../src/runtime/abort-word.ts';
import { CommTimeoutError, RankFailedError } from '../src/runtime/errors.ts';
import {
  markWaitClock,
  setSpinBudget,
  waitBriefly,
  waitClockRead,
  waitForWord,
  wake,
} from '../src/runtime/wait.ts';

/** A thread that sets word 0 to `value` and notifies its waiters after `ms`, or raises the abort flag instead. */
function later(words: Int32Array, ms: number, value: number, abort?: AbortWord): Worker {
  const code = `
    const { workerData: { buffer, abort, ms, value } } = require('node:worker_threads');
    const words = new Int32Array(buffer);
    setTimeout(() => {
      if (abort) {
        // An abort raised the way AbortWord does it, without a notify on the word waited on.
        const flag = new Int32Array(abort, 0, 2);
        Atomics.store(flag, 1, 0);
        Atomics.store(flag, 0, 3);
      } else {
        Atomics.store(words, 0, value);
        Atomics.notify(words, 0);
      }
    }, ms);`;
  return new Worker(code, {
    eval: true,
    workerData: { buffer: words.buffer, abort: abort?.buffer, ms, value },
  });
}

/** A thread that stores `value` in word 0 after `ms`, without a notify (what a yielding wait must see anyway). */
function storeLater(words: Int32Array, ms: number, value: number): Worker {
  const code = `
    const { workerData: { buffer, ms, value } } = require('node:worker_threads');
    setTimeout(() => Atomics.store(new Int32Array(buffer), 0, value), ms);`;
  return new Worker(code, { eval: true, workerData: { buffer: words.buffer, ms, value } });
}

/** Resolves to whether a timer set just before `wait` fired while the wait was still running. */
async function timerFiredDuring(wait: () => Promise<unknown>): Promise<boolean> {
  let fired = false;
  let settled = false;
  setTimeout(() => {
    fired = true;
  }, 1);
  const result = wait().finally(() => {
    settled = true;
  });
  const firedBefore = await new Promise<boolean>((resolve) => {
    const check = setInterval(() => {
      if (fired || settled) {
        clearInterval(check);
        resolve(fired && !settled);
      }
    }, 0);
  });
  await result.catch(() => {});
  return firedBefore;
}

/** Whether the event loop ran while a wait for a worker's notify 150 ms later was under way. */
async function loopRanDuringWait(threadsPerCore: number, blockMs: number | undefined): Promise<boolean> {
  setSpinBudget(threadsPerCore);
  const words = new Int32Array(new SharedArrayBuffer(4));
  const worker = later(words, 150, 1);
  try {
    const fired = await timerFiredDuring(() =>
      waitForWord(words, 0, (v) => v === 1, {
        deadline: performance.now() + 10_000,
        abort: undefined,
        describe: () => 'the worker',
        blockMs,
      }),
    );
    expect(Atomics.load(words, 0)).toBe(1);
    return fired;
  } finally {
    await worker.terminate();
  }
}

describe('waitForWord', () => {
  afterEach(() => setSpinBudget(1));

  it('with more ranks than cores, blocks its thread for blockMs: a notify ends the wait without an event-loop turn', async () => {
    expect(await loopRanDuringWait(2, 5_000)).toBe(false);
  });

  it('parks on the event loop instead while every rank has a core, or without blockMs', async () => {
    expect(await loopRanDuringWait(1, 5_000), '1 thread per core').toBe(true);
    expect(await loopRanDuringWait(2, undefined), 'no blockMs').toBe(true);
  });

  it('a blocked wait sees an abort raised without a notify, and its deadline', async () => {
    setSpinBudget(2);
    const words = new Int32Array(new SharedArrayBuffer(4));
    const abort = new AbortWord();
    const worker = later(words, 100, 1, abort);
    try {
      const aborted = await waitForWord(words, 0, (v) => v === 1, {
        deadline: performance.now() + 10_000,
        abort,
        describe: () => 'the worker',
        blockMs: 5_000,
      }).catch((e: unknown) => e);
      expect(aborted).toBeInstanceOf(RankFailedError);
    } finally {
      await worker.terminate();
    }
    const timedOut = await waitForWord(words, 0, (v) => v === 7, {
      deadline: performance.now() + 30,
      abort: undefined,
      describe: () => 'nobody',
      blockMs: 5_000,
    }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(CommTimeoutError);
    expect((timedOut as Error).message).toBe('nobody');
  });
});

/** Word 0 to wait on, its sleepers counted in word 1, and the options of such a wait. */
function countedWait() {
  const words = new Int32Array(new SharedArrayBuffer(8));
  return {
    words,
    options: { deadline: performance.now() + 10_000, abort: undefined, describe: () => 'x', sleepers: 1 },
  };
}

describe('wake', () => {
  it('notifies only while a wait counted itself as a sleeper, before it read the value it sleeps on', async () => {
    const { words, options } = countedWait();
    // Past its spin the wait parks (synchronously, within the call) and is counted.
    const parked = waitForWord(words, 0, (v) => v === 1, options);
    expect(Atomics.load(words, 1)).toBe(1);
    Atomics.store(words, 0, 1);
    expect(wake(words, 0, 1)).toBe(1);
    await parked;
    expect(Atomics.load(words, 1)).toBe(0);
    // Nobody sleeps: no notify is paid for.
    Atomics.store(words, 0, 2);
    expect(wake(words, 0, 1)).toBe(0);
    // A wait whose value is there after it counted itself does not park, and leaves no count behind.
    await waitForWord(words, 0, (v) => v === 2, options);
    expect(Atomics.load(words, 1)).toBe(0);
  });
});

describe('waitForWord after its caller spun', () => {
  it('parks at once, without a second spin (the spin reads the clock; the park does not)', async () => {
    const { words, options } = countedWait();
    for (const spun of [false, true]) {
      Atomics.store(words, 0, 0);
      const mark = markWaitClock();
      const parked = waitForWord(words, 0, (v) => v === 1, { ...options, spun });
      expect(waitClockRead(mark), spun ? 'spun: parked at once' : 'not spun: spun first').toBe(!spun);
      expect(Atomics.load(words, 1)).toBe(1);
      Atomics.store(words, 0, 1);
      wake(words, 0, 1);
      await parked;
    }
  });
});

describe('waitBriefly', () => {
  afterEach(() => setSpinBudget(1));
  const isOne = (v: number) => v === 1;

  it('is true at once for a ready word, and false after the spin without blockMs', () => {
    setSpinBudget(2);
    const words = new Int32Array(new SharedArrayBuffer(4));
    expect(waitBriefly(words, 0, (v) => v === 0, performance.now() + 1_000, undefined, 5_000)).toBe(true);
    expect(waitBriefly(words, 0, isOne, performance.now() + 1_000, undefined)).toBe(false);
  });

  it('with more ranks than cores and blockMs, keeps the thread until another thread stores the word, notify or not', async () => {
    setSpinBudget(2);
    const words = new Int32Array(new SharedArrayBuffer(4));
    const worker = storeLater(words, 50, 1);
    try {
      await new Promise((resolve) => worker.once('online', resolve));
      expect(waitBriefly(words, 0, isOne, performance.now() + 10_000, undefined, 5_000)).toBe(true);
    } finally {
      await worker.terminate();
    }
  });

  it('gives up when blockMs or the deadline passes, whichever comes first, and throws the abort error', () => {
    setSpinBudget(2);
    const words = new Int32Array(new SharedArrayBuffer(4));
    expect(waitBriefly(words, 0, isOne, performance.now() + 10_000, undefined, 20)).toBe(false);
    expect(waitBriefly(words, 0, isOne, performance.now() + 20, undefined, 10_000)).toBe(false);
    const abort = new AbortWord();
    abort.abort(3, 'rank 3 failed');
    expect(() => waitBriefly(words, 0, isOne, performance.now() + 10_000, abort, 5_000)).toThrow(
      /rank 3 failed/,
    );
  });
});

describe('AbortWord', () => {
  it('reads as healthy while a raise is still writing its reason, so no wait fails without the root cause', () => {
    const abort = new AbortWord();
    const state = new Int32Array(abort.buffer, 0, 1);
    // What a raising thread leaves between its claim and its reason (the claim's sentinel).
    Atomics.store(state, 0, -0x7fffffff);
    expect(abort.aborted).toBe(false);
    expect(abort.error()).toBeUndefined();
    Atomics.store(state, 0, 0);
    expect(abort.abort(1, 'rank 1 (rank-1) exited with code 3')).toBe(true);
    expect(abort.aborted).toBe(true);
    expect(abort.error()).toMatchObject({ message: 'rank 1 (rank-1) exited with code 3', failedRank: 1 });
  });
});

describe('waitForWord on memory that processes map (no SharedArrayBuffer: nothing can park on it)', () => {
  it('looks until the word is ready, or its deadline passes naming what it waited for', async () => {
    const words = new Int32Array(new ArrayBuffer(8));
    const ready = (value: number) => value === 7;
    setTimeout(() => Atomics.store(words, 1, 7), 20);
    const options = { deadline: performance.now() + 5_000, abort: undefined, describe: () => 'never' };
    await waitForWord(words, 1, ready, options);
    expect(Atomics.load(words, 1)).toBe(7);
    const late = {
      deadline: performance.now() + 30,
      abort: undefined,
      describe: () => 'rank 3 waited for word 0',
    };
    const error = await waitForWord(words, 0, ready, late).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommTimeoutError);
    expect((error as Error).message).toBe('rank 3 waited for word 0');
  });

  it("ends with the job's abort", async () => {
    const words = new Int32Array(new ArrayBuffer(4));
    const abort = new AbortWord();
    setTimeout(() => abort.abort(2, 'rank 2 failed: boom'), 20);
    const options = { deadline: performance.now() + 5_000, abort, describe: () => 'never' };
    const error = await waitForWord(words, 0, (v) => v === 1, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RankFailedError);
  });
});

describe('waitForWord on memory that processes map, with a doorbell to park on', () => {
  /** A doorbell of the test's own: parks until rung, and records how long each park was allowed. */
  function doorbell() {
    const parks: number[] = [];
    let ring: () => void = () => {};
    const park = (ms: number) => {
      parks.push(ms);
      return new Promise<void>((resolve) => {
        ring = resolve;
      });
    };
    return { parks, park, ring: () => ring() };
  }

  it('parks counted on its sleepers word until rung, looks again, and uncounts itself', async () => {
    const words = new Int32Array(new ArrayBuffer(8));
    const bell = doorbell();
    const options = {
      deadline: performance.now() + 60_000,
      abort: undefined,
      describe: () => 'never',
      sleepers: 1,
      park: bell.park,
    };
    const waiting = waitForWord(words, 0, (v) => v === 5, options);
    // Past the brief spin, parked: counted, so a waker in another process knows to ring.
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(bell.parks.length).toBe(1);
    expect(Atomics.load(words, 1)).toBe(1);
    // A ring with the word not ready yet: it looks and parks again.
    bell.ring();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(bell.parks.length).toBe(2);
    Atomics.store(words, 0, 5);
    bell.ring();
    await waiting;
    expect(Atomics.load(words, 1)).toBe(0);
    // No park outlasts the bound that covers a wake gone astray, nor the deadline.
    expect(Math.max(...bell.parks)).toBeLessThanOrEqual(20);
  });

  it('ends at its deadline naming what it waited for, and with the abort, uncounted either way', async () => {
    const words = new Int32Array(new ArrayBuffer(8));
    const park = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
    const late = { deadline: performance.now() + 30, abort: undefined, describe: () => 'rank 1 to answer' };
    const timedOut = await waitForWord(words, 0, (v) => v === 1, { ...late, sleepers: 1, park }).catch(
      (e: unknown) => e,
    );
    expect(timedOut).toBeInstanceOf(CommTimeoutError);
    expect((timedOut as Error).message).toBe('rank 1 to answer');
    const abort = new AbortWord();
    setTimeout(() => abort.abort(2, 'rank 2 failed: boom'), 20);
    const options = {
      deadline: performance.now() + 5_000,
      abort,
      describe: () => 'never',
      sleepers: 1,
      park,
    };
    expect(await waitForWord(words, 0, (v) => v === 1, options).catch((e: unknown) => e)).toBeInstanceOf(
      RankFailedError,
    );
    expect(Atomics.load(words, 1)).toBe(0);
  });
});
