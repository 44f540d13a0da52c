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

/**
 * Spinning only pays while every waiting thread has a core: with more ranks
 * than cores a spinner burns the time slice the thread it waits for needs.
 */
export function setSpinBudget(threadsPerCore: number): void {
  spinMs = threadsPerCore <= 1 ? 0.2 : 0.005;
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
}

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
