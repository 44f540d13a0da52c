/**
 * The one way tensorcomm blocks: spin briefly (a peer thread usually answers
 * within microseconds), then park on the word with Atomics.waitAsync so the
 * rank's event loop stays free. Parks are chunked so an abort raised without a
 * notify on this word is still seen quickly, and a ref'd timer keeps the event
 * loop alive while parked (a pending waitAsync alone does not).
 */
import type { AbortWord } from './abort-word.ts';
import { CommTimeoutError } from './errors.ts';

const PARK_CHUNK_MS = 50;
/** How long a wait spins before parking. Waking from a park takes an event-loop turn (tens of µs or more). */
let spinMs = 0.2;
/** Whether ranks outnumber cores: only then do waits that may block (blockMs) block. */
let oversubscribed = false;

/**
 * Spinning only pays while every waiting thread has a core: with more ranks
 * than cores a spinner burns the time slice the thread it waits for needs.
 */
export function setSpinBudget(threadsPerCore: number): void {
  spinMs = threadsPerCore <= 1 ? 0.2 : 0.005;
  oversubscribed = threadsPerCore > 1;
}

let parkedWaiters = 0;
let keepAlive: NodeJS.Timeout | undefined;

function holdEventLoop(): void {
  if (parkedWaiters++ === 0) keepAlive = setInterval(() => {}, 1 << 30);
}

function releaseEventLoop(): void {
  if (--parkedWaiters === 0) {
    clearInterval(keepAlive);
    keepAlive = undefined;
  }
}

export interface WaitOptions {
  /** Absolute deadline in performance.now() milliseconds. */
  deadline: number;
  abort: AbortWord | undefined;
  /** Called only on timeout: who is waiting for whom, and for what. */
  describe: () => string;
  /**
   * With more ranks than cores, after the spin, block the thread
   * (Atomics.wait) for up to this long before parking on the event loop: a
   * notify then wakes the thread itself, without an event-loop turn, and the
   * blocked thread leaves its core to the ranks it waits for. Only for waits
   * in which the rank has nothing else to do (every rank of its group is in
   * the same collective): its event loop stands still meanwhile.
   */
  blockMs?: number;
}

/** A blocked wait looks at the abort word this often (an abort need not notify the word waited on). */
const BLOCK_CHUNK_MS = 10;

export function deadlineAfter(timeoutMs: number): number {
  return performance.now() + timeoutMs;
}

/**
 * Resolves once `ready(Atomics.load(words, index))` holds. Rejects with the
 * job's abort error or a CommTimeoutError naming what was awaited.
 */
export async function waitForWord(
  words: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  options: WaitOptions,
): Promise<void> {
  let value = Atomics.load(words, index);
  if (ready(value)) return;
  const spinUntil = performance.now() + spinMs;
  do {
    for (let i = 0; i < 64 && !ready(value); i++) value = Atomics.load(words, index);
    if (ready(value)) return;
  } while (performance.now() < spinUntil);
  if (options.blockMs && oversubscribed) {
    const blockUntil = Math.min(options.deadline, performance.now() + options.blockMs);
    for (let left = blockUntil - performance.now(); left > 0; left = blockUntil - performance.now()) {
      options.abort?.throwIfAborted();
      Atomics.wait(words, index, value, Math.min(left, BLOCK_CHUNK_MS));
      value = Atomics.load(words, index);
      if (ready(value)) return;
    }
  }
  holdEventLoop();
  try {
    for (;;) {
      options.abort?.throwIfAborted();
      const remaining = options.deadline - performance.now();
      if (remaining <= 0) throw new CommTimeoutError(options.describe());
      const parked = Atomics.waitAsync(words, index, value, Math.min(remaining, PARK_CHUNK_MS));
      if (parked.async) await parked.value;
      value = Atomics.load(words, index);
      if (ready(value)) return;
    }
  } finally {
    releaseEventLoop();
  }
}
