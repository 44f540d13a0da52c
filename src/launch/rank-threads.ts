/**
 * One job's rank threads as spawnThreads drives them (RankProcesses is the
 * same for a node's processes): their reports collected (results, failures,
 * ranks an injected fault took out), and their ends. The first failure
 * aborts the job (every waiting rank is told who failed) and, after the
 * grace period, stops the threads still running. A rank an injected `exit`
 * or `hang` took out is no failure; once every other rank has finished the
 * job is ended for it too.
 */
import { type AbortWord, NO_RANK } from '../runtime/abort-word.ts';
import { CommTimeoutError } from '../runtime/errors.ts';
import type { LostHow } from '../runtime/faults/injector.ts';
import { LaunchError } from './errors.ts';
import { failRunning, jobTimeoutMessage, type RankFailure } from './job-options.ts';
import { type RankReport, reviveError } from './rank-report.ts';
import { unpackTensors } from './tensor-transfer.ts';

/**
 * Stopping a thread while a native addon initialises (koffi loads with the
 * library, lz4 and zstd when first used) aborts the whole process: node-addon-api treats the failed
 * napi_throw of a terminating thread as fatal. A thread that is still loading
 * is stopped once it has loaded, or after this long at the latest.
 */
const LOADING_STOP_MS = 10_000;

/**
 * A rank's outcome, and before it that the rank has loaded its modules and starts its main function,
 * or that an injected fault takes it out.
 */
export type RankWorkerReport = RankReport | { kind: 'loaded' } | { kind: 'lost'; how: LostHow };

/** A rank's thread as a job drives it: a Worker of its own, or a warm one lent for the job (RankThreadPool). */
export interface RankThread {
  on(event: 'message', listener: (report: RankWorkerReport) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'exit', listener: (code: number) => void): unknown;
  terminate(): Promise<number>;
}

export interface RankThreadsOptions {
  /** Worker names by rank, for messages. */
  names: readonly string[];
  graceMs: number;
  /** Tells every rank that the job is over, and why. */
  abort: AbortWord;
  /** Wakes the ranks waiting in the job's shared memory, so they see the abort word. */
  wake(): void;
}

export class RankThreads {
  /** By rank (undefined for a rank that failed or was lost). */
  readonly results: unknown[];
  /** Root cause first. */
  readonly failures: RankFailure[] = [];
  /** Resolves once every rank thread has exited. */
  readonly exited: Promise<void>;
  readonly #threads: readonly RankThread[];
  readonly #o: RankThreadsOptions;
  /** By rank: whether its outcome is known. */
  readonly #settled: boolean[];
  /** By rank: whether it loaded its modules, so it can be stopped safely (LOADING_STOP_MS). */
  readonly #loaded: boolean[];
  readonly #stopWhenLoaded = new Set<number>();
  readonly #lastResortTimers: NodeJS.Timeout[] = [];
  /** Ranks an injected fault took out on purpose: not failures, and ended once nobody else runs. */
  readonly #lost = new Map<number, LostHow>();
  #graceTimer: NodeJS.Timeout | undefined;

  /** `threads`: rank r's thread at r, started. */
  constructor(threads: readonly RankThread[], options: RankThreadsOptions) {
    this.#threads = threads;
    this.#o = options;
    this.results = new Array(threads.length);
    this.#settled = new Array<boolean>(threads.length).fill(false);
    this.#loaded = new Array<boolean>(threads.length).fill(false);
    this.exited = Promise.all(threads.map((thread, rank) => this.#watch(thread, rank))).then(() => {});
  }

  /** The job ran past `timeoutMs`: the ranks still running fail with that, and the job is aborted. */
  timeOut(timeoutMs: number): void {
    const message = jobTimeoutMessage(timeoutMs, this.#settled);
    failRunning(this.#settled, this.failures, message, (text) => new CommTimeoutError(text));
    if (this.#o.abort.abort(NO_RANK, message)) this.#o.wake();
    this.#graceTimer ??= setTimeout(() => this.#terminateAll(), this.#o.graceMs);
  }

  /** Once every thread has exited: no stop is left pending. */
  clearTimers(): void {
    clearTimeout(this.#graceTimer);
    for (const timer of this.#lastResortTimers) clearTimeout(timer);
  }

  #abortJob(rank: number, message: string): void {
    if (this.#o.abort.abort(rank, message)) {
      this.#o.wake();
      this.#graceTimer ??= setTimeout(() => this.#terminateAll(), this.#o.graceMs);
    }
  }

  #fail(rank: number, error: Error): void {
    this.failures.push({ rank, error });
    // The first line: a hang report in the rest is the failed rank's to print, not every peer's.
    this.#abortJob(
      rank,
      `rank ${rank} (${this.#o.names[rank]}) failed: ${error.name}: ${error.message.split('\n')[0]}`,
    );
  }

  #endLostOnceOthersDone(): void {
    const lost = this.#lost;
    if (lost.size === 0 || this.#settled.some((done, rank) => !done && !lost.has(rank))) return;
    this.#abortJob(NO_RANK, 'the job is over: every rank that no injected fault took out has finished');
  }

  #stop(rank: number): void {
    const thread = this.#threads[rank];
    if (this.#loaded[rank]) {
      void thread.terminate();
      return;
    }
    if (this.#stopWhenLoaded.has(rank)) return;
    this.#stopWhenLoaded.add(rank);
    this.#lastResortTimers.push(setTimeout(() => void thread.terminate(), LOADING_STOP_MS));
  }

  #terminateAll(): void {
    for (let rank = 0; rank < this.#threads.length; rank++) this.#stop(rank);
  }

  /** Follows rank `rank`'s thread until it exits. */
  #watch(thread: RankThread, rank: number): Promise<void> {
    return new Promise<void>((resolveExit) => {
      thread.on('message', (report: RankWorkerReport) => {
        if (report.kind === 'loaded') {
          this.#loaded[rank] = true;
          if (this.#stopWhenLoaded.has(rank)) void thread.terminate();
          return;
        }
        if (report.kind === 'lost') {
          this.#lost.set(rank, report.how);
          this.#endLostOnceOthersDone();
          return;
        }
        if (this.#settled[rank]) return;
        this.#settled[rank] = true;
        // A hung rank unwinds once the job ends it; what it reports then is not the job's outcome.
        if (this.#lost.has(rank)) void thread.terminate();
        else if (report.kind === 'result') {
          this.results[rank] = unpackTensors(report.value);
          // The rank is done; handles its code left open must not keep the job alive.
          void thread.terminate();
        } else this.#fail(rank, reviveError(report.error));
        this.#endLostOnceOthersDone();
      });
      thread.on('error', (error) => {
        if (this.#settled[rank]) return;
        this.#settled[rank] = true;
        if (!this.#lost.has(rank)) this.#fail(rank, error);
        this.#endLostOnceOthersDone();
      });
      thread.on('exit', (code) => {
        if (!this.#settled[rank]) {
          this.#settled[rank] = true;
          const exited = `rank ${rank} (${this.#o.names[rank]}) exited with code ${code} before returning`;
          // Peers learn of an injected crash as of a real one; only the job does not count it.
          if (this.#lost.get(rank) === 'exit') this.#abortJob(rank, `${exited} (an injected fault)`);
          else if (!this.#lost.has(rank)) this.#fail(rank, new LaunchError(exited));
          this.#endLostOnceOthersDone();
        }
        resolveExit();
      });
    });
  }
}
