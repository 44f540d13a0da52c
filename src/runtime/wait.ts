/**
 * The one way tensorcomm blocks: spin briefly (a peer thread usually answers
 * within microseconds), then park on the word with Atomics.waitAsync so the
 * rank's event loop stays free. Parks are chunked so an abort raised without a
 * notify on this word is still seen quickly, and a ref'd timer keeps the event
 * loop alive while parked (a pending waitAsync alone does not).
 */
import type { AbortWord } from './abort-word.ts';
import { CommTimeoutError } from './errors.ts';
import { schedYield } from './libc.ts';

const PARK_CHUNK_MS = 50;
/** How long a wait of a thread rank spins before parking. Waking from a park takes an event-loop turn, longer than a small call. */
const THREAD_SPIN_MS = 0.2;
let spinMs = THREAD_SPIN_MS;
/** How long a spin looks before it gives its core away between looks (see setSpinBudget). */
let politeAfterMs = Number.POSITIVE_INFINITY;
/** Whether ranks outnumber cores: only then do waits that may block (blockMs) block. */
let oversubscribed = false;

/**
 * Spinning only pays while every waiting thread has a core: with more ranks
 * than cores a spinner burns the time slice the thread it waits for needs.
 * `fullSpinMs`, the spin where it pays: a process rank's wait spins longer
 * (runtime/spin-policy.ts's SPIN_MS), since its wake-up costs a doorbell's
 * pipe and an event-loop turn on both sides. `yieldAfterMs`: past this much
 * of a spin, it gives its core away between looks (sched_yield, where libc
 * has it), as the rings' waits do (spin-policy.ts). A process rank needs it:
 * Linux wakes a process rung through a pipe on the ringer's core, where it
 * waited behind the ringer's spin (a fresh job's first thousands of round
 * trips between 2 processes on 2 cores: a doorbell's wake-up took 1.1 ms,
 * and yielding took the mean round trip from 55 to 46 µs, median of 8 jobs).
 * Thread ranks, woken by a notify, gained nothing by it.
 */
export function setSpinBudget(
  threadsPerCore: number,
  fullSpinMs = THREAD_SPIN_MS,
  yieldAfterMs = Number.POSITIVE_INFINITY,
): void {
  spinMs = threadsPerCore <= 1 ? fullSpinMs : 0.005;
  politeAfterMs = yieldAfterMs;
  oversubscribed = threadsPerCore > 1;
}

/** `performance` held here: the global is a getter, called on every read of it. */
const clock = performance;

/** The clock the waits and calls read (performance.now() milliseconds). */
export function clockNow(): number {
  return clock.now();
}

/*
 * The synchronous waits' clock: how many readings they made, their last,
 * and their first since a caller's mark. A call that completed as it
 * returned takes its times from these instead of reading the clock itself
 * (a reading costs as much as a tenth of a small call): it started about
 * the first reading of its waits and ended about the last.
 */
let readings = 0;
let lastReading = 0;
let markedAt = 0;
let firstSinceMark = 0;

function readClock(): number {
  const now = clock.now();
  if (readings === markedAt) firstSinceMark = now;
  readings++;
  lastReading = now;
  return now;
}

/** Marks the waits' clock (a call starting): its readings so far, for waitClockRead. */
export function markWaitClock(): number {
  markedAt = readings;
  return readings;
}

/** Whether the synchronous waits read the clock since `mark` (markWaitClock's). */
export function waitClockRead(mark: number): boolean {
  return readings !== mark;
}

/** The waits' first clock reading since the latest mark, and their last (performance.now() milliseconds). */
export function firstWaitReading(): number {
  return firstSinceMark;
}

export function lastWaitReading(): number {
  return lastReading;
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

/** What ends a wait besides its word and deadline: the job's abort flag, or a check of the waiter's own (a store that closed). */
export type WaitStop = Pick<AbortWord, 'throwIfAborted'>;

export interface WaitOptions {
  /** Absolute deadline in performance.now() milliseconds. */
  deadline: number;
  abort: WaitStop | undefined;
  /** Called only on timeout: who is waiting for whom, and for what. */
  describe: () => string;
  /**
   * With more ranks than cores, keep the thread for up to this long before
   * parking on the event loop, giving its core away with sched_yield where
   * libc has it, else blocking it (Atomics.wait, after the spin): the ready
   * word is then seen without an event-loop turn, and the core goes to the
   * ranks this one waits for. Only for waits
   * in which the rank has nothing else to do (every rank of its group is in
   * the same collective): its event loop stands still meanwhile.
   */
  blockMs?: number;
  /** Where the waker counts on sleepers: see waitBriefly's `sleepers` and wake(). */
  sleepers?: number;
  /** The caller's own waitBriefly just saw the word not ready: park without a second spin. */
  spun?: boolean;
  /**
   * For memory that several processes map, which Atomics cannot park on:
   * parks the process until its doorbell rings or `ms` pass (TensorStore.nodeDoorbells).
   * The waker rings it where the wait counted itself on `sleepers` (or,
   * without, where its own protocol says so); without `park` the wait looks
   * every POLL_MS.
   */
  park?: (ms: number) => Promise<void>;
}

/** A blocked wait looks at the abort word this often (an abort need not notify the word waited on). */
const BLOCK_CHUNK_MS = 10;
/** A yielding wait looks at the clock and the abort word after this many yields. */
const YIELDS_PER_CHECK = 16;

/**
 * Keeps the thread until the word is ready or `until` passes; returns the
 * last value read. Where libc has sched_yield it gives the core away in
 * between, as Open MPI's progress loop does when oversubscribed: a thread
 * ready to run gets the core at once, and no waker pays a futex wake per
 * waiter, a system call and a reschedule for every rank on every small
 * call. Elsewhere it blocks on the word (Atomics.wait) in chunks.
 */
function keepThread(
  words: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  until: number,
  abort: WaitStop | undefined,
  sleepers: number | undefined,
): number {
  const giveCore = schedYield();
  // Counted before the value it sleeps on is read (see wake).
  const counted = !giveCore && sleepers !== undefined;
  if (counted) Atomics.add(words, sleepers, 1);
  try {
    let value = Atomics.load(words, index);
    for (let left = until - readClock(); left > 0; left = until - readClock()) {
      abort?.throwIfAborted();
      if (giveCore) {
        for (let i = 0; i < YIELDS_PER_CHECK; i++) {
          giveCore();
          value = Atomics.load(words, index);
          if (ready(value)) return value;
        }
      } else {
        Atomics.wait(words, index, value, Math.min(left, BLOCK_CHUNK_MS));
        value = Atomics.load(words, index);
        if (ready(value)) return value;
      }
    }
    return value;
  } finally {
    if (counted) Atomics.sub(words, sleepers, 1);
  }
}

/**
 * Notifies the waits sleeping on word `index` (after the word was stored),
 * where there are any: waits given a `sleepers` word count themselves on it
 * before they read the value they sleep on, so with both sides' accesses
 * sequentially consistent either such a wait reads the new value, or this
 * sees it counted. Spares every waker of waits that end within their spin
 * (most, where ranks keep pace) an Atomics.notify, whose lock all threads share.
 * Returns how many waits it woke.
 */
export function wake(words: Int32Array, index: number, sleepers: number): number {
  return Atomics.load(words, sleepers) === 0 ? 0 : Atomics.notify(words, index);
}

export function deadlineAfter(timeoutMs: number): number {
  return clock.now() + timeoutMs;
}

/**
 * The synchronous start of every wait: a spin and, with `blockMs` and more
 * ranks than cores, the thread kept for up to that long (see
 * WaitOptions.blockMs). Whether `ready(Atomics.load(words, index))` came to
 * hold; throws the job's abort error.
 */
export function waitBriefly(
  words: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  deadline: number,
  abort: WaitStop | undefined,
  blockMs?: number,
  sleepers?: number,
): boolean {
  let value = Atomics.load(words, index);
  if (ready(value)) return true;
  const blocks = blockMs !== undefined && oversubscribed;
  // Blocking waits give their core away with sched_yield where libc has it, else block (Atomics.wait).
  const yields = blocks && schedYield() !== null;
  // A yielding wait gives its core away at once: a spin would burn the slice of the thread it waits for.
  if (!yields) {
    const started = readClock();
    const spinUntil = started + spinMs;
    const politeFrom = started + politeAfterMs;
    let now = started;
    do {
      for (let i = 0; i < 64 && !ready(value); i++) value = Atomics.load(words, index);
      if (ready(value)) return true;
      if (now >= politeFrom) schedYield()?.();
      now = readClock();
    } while (now < spinUntil);
  }
  if (!blocks) return false;
  const until = Math.min(deadline, readClock() + (blockMs as number));
  return ready(keepThread(words, index, ready, until, abort, sleepers));
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
  const { sleepers } = options;
  if (
    !options.spun &&
    waitBriefly(words, index, ready, options.deadline, options.abort, options.blockMs, sleepers)
  )
    return;
  // Memory another process maps (a file of the job directory) cannot be parked on.
  if (!(words.buffer instanceof SharedArrayBuffer)) return waitOnMappedWord(words, index, ready, options);
  if (sleepers !== undefined) Atomics.add(words, sleepers, 1);
  try {
    let value = Atomics.load(words, index);
    // Stored between the brief wait's last look and this load, its notify already went: parking would miss it.
    if (ready(value)) return;
    holdEventLoop();
    try {
      for (;;) {
        options.abort?.throwIfAborted();
        const remaining = options.deadline - clock.now();
        if (remaining <= 0) throw new CommTimeoutError(options.describe());
        const parked = Atomics.waitAsync(words, index, value, Math.min(remaining, PARK_CHUNK_MS));
        if (parked.async) await parked.value;
        value = Atomics.load(words, index);
        if (ready(value)) return;
      }
    } finally {
      releaseEventLoop();
    }
  } finally {
    if (sleepers !== undefined) Atomics.sub(words, sleepers, 1);
  }
}

/** How often pollUntil looks. */
const POLL_MS = 1;
/**
 * How long a wait on mapped memory stays parked on its process's doorbell
 * before it looks again: its waker rings, so this only bounds what a wake
 * that went astray (its process's store closing) would cost.
 */
const DOORBELL_PARK_MS = 20;

/**
 * waitForWord's slow part on memory that several processes map: parked on
 * the process's doorbell (`park`), counted on `sleepers` before each look so
 * that a waker that stored the word after the look sees the count and rings;
 * without a doorbell, a look every POLL_MS.
 */
async function waitOnMappedWord(
  words: Int32Array,
  index: number,
  ready: (value: number) => boolean,
  options: WaitOptions,
): Promise<void> {
  const look = () => ready(Atomics.load(words, index)) || undefined;
  const { park, sleepers } = options;
  if (!park) return void (await pollUntil(look, options));
  if (sleepers !== undefined) Atomics.add(words, sleepers, 1);
  try {
    for (;;) {
      if (look()) return;
      options.abort?.throwIfAborted();
      const remaining = options.deadline - clock.now();
      if (remaining <= 0) throw new CommTimeoutError(options.describe());
      await park(Math.min(remaining, DOORBELL_PARK_MS));
    }
  } finally {
    if (sleepers !== undefined) Atomics.sub(words, sleepers, 1);
  }
}

/**
 * Resolves to what `found` returns once it returns something, looking every
 * POLL_MS: for what no notify can announce (memory that several processes
 * map, a file another process makes), where a wait is rare enough that a
 * look per millisecond costs nothing. Rejects as waitForWord does.
 */
export async function pollUntil<T>(
  found: () => T | undefined,
  options: Pick<WaitOptions, 'deadline' | 'abort' | 'describe'>,
): Promise<T> {
  for (;;) {
    const value = found();
    if (value !== undefined) return value;
    options.abort?.throwIfAborted();
    const remaining = options.deadline - clock.now();
    if (remaining <= 0) throw new CommTimeoutError(options.describe());
    await new Promise((resolve) => setTimeout(resolve, Math.min(remaining, POLL_MS)));
  }
}
