/**
 * RankThreadPool: rank threads kept warm between jobs, for many short jobs in
 * a row (rankTest runs every test of a file on one pool). Starting a thread
 * costs hundreds of milliseconds to seconds (Node, tsx, the library, a test
 * file); a warm thread starts a job in milliseconds. A job on the pool is a
 * spawnThreads job in everything else: it gets its own store, status board,
 * abort word, groups and config, and its threads are lent to it only for its
 * lifetime. A thread that dies or has to be stopped is replaced by a new one
 * at the next job; the others go back to the pool once they reported.
 */
import { EventEmitter } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { InvalidStateError } from '../runtime/errors.ts';
import { LaunchError } from './errors.ts';
import { checkJobOptions } from './job-options.ts';
import type { PoolReport, PoolRequest, PoolWorkerData } from './pool-worker.ts';
import { reviveError } from './rank-report.ts';
import { rankSetupUrl } from './rank-setup.ts';
import type { RankThread, RankWorkerReport } from './rank-threads.ts';
import {
  bundleBootstrap,
  type RankBootstrap,
  type RankWorkerData,
  runRankThreads,
  type SpawnThreadsOptions,
  startRankWorker,
} from './spawn-threads.ts';
import { checkThreadMemory, DEFAULT_RANK_THREAD_BYTES, rankResourceLimits } from './thread-memory.ts';

/** Far above a thread's start-up on a loaded machine (seconds), far below forever. */
const START_TIMEOUT_MS = 120_000;

/** A module every thread of a job loads, and whose `prepare(arg)` it runs, before the job starts. */
export interface PoolPreparation {
  module: string;
  arg: unknown;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LaunchError(`${what()} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The job's view of a pooled thread: its reports until its outcome, then an exit, while the thread lives on. */
class LentThread extends EventEmitter implements RankThread {
  #reported = false;

  constructor(readonly thread: PooledThread) {
    super();
  }

  deliver(report: RankWorkerReport): void {
    const outcome = report.kind === 'result' || report.kind === 'error';
    // Before the job sees it: the job stops a rank once it has its result, which must not stop a lent thread.
    if (outcome) {
      this.#reported = true;
      this.thread.returned();
    }
    this.emit('message', report);
    if (!outcome) return;
    // The job waits for every rank's exit; for a lent thread that is the end of its part in the job.
    queueMicrotask(() => this.emit('exit', 0));
  }

  /** After the outcome there is nothing to stop; before it, the thread is stopped for good. */
  async terminate(): Promise<number> {
    if (this.#reported) return 0;
    return this.thread.worker.terminate();
  }

  get reported(): boolean {
    return this.#reported;
  }
}

class PooledThread {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  readonly #prepared = new Set<string>();
  #alive = true;
  #lent: LentThread | undefined;
  /** Settles the request in flight (the start, or a prepare): one at a time, the thread answers in order. */
  #answer: ((report: PoolReport | undefined, error?: Error) => void) | undefined;

  /** `worldSize`: of the job it starts for (a later job may be of another size). */
  constructor(bootstrap: RankBootstrap, setupUrl: string, worldSize: number) {
    const workerData: PoolWorkerData = { pool: true, setupUrl };
    this.worker = startRankWorker(bootstrap, workerData, rankResourceLimits(worldSize));
    this.ready = this.#next('ready', () => 'starting a rank thread');
    this.worker.on('message', (message: PoolReport | RankWorkerReport) => {
      if (message.kind === 'ready' || message.kind === 'prepared' || message.kind === 'prepare-failed') {
        this.#answer?.(message);
      } else this.#lent?.deliver(message);
    });
    this.worker.on('error', (error) => {
      if (this.#lent) this.#lent.emit('error', error);
      else this.#answer?.(undefined, error);
    });
    this.worker.on('exit', (code) => {
      this.#alive = false;
      if (this.#lent && !this.#lent.reported) this.#lent.emit('exit', code);
      this.#lent = undefined;
      this.#answer?.(undefined, new LaunchError(`the rank thread exited with code ${code}`));
    });
  }

  get alive(): boolean {
    return this.#alive;
  }

  /** The next answer to a request (or the start), as a promise; a failed or dead thread rejects it. */
  #next(kind: 'ready' | 'prepared', what: () => string): Promise<void> {
    const answer = new Promise<void>((resolve, reject) => {
      this.#answer = (report, error) => {
        this.#answer = undefined;
        if (report?.kind === kind) resolve();
        else if (report?.kind === 'prepare-failed') reject(reviveError(report.error));
        // A pooled thread answers a request only as pool-worker.ts says: another answer is a bug in tensorcomm.
        else reject(error ?? new Error(`unexpected ${report?.kind}`));
      };
    });
    return withTimeout(answer, START_TIMEOUT_MS, what);
  }

  async prepare({ module, arg }: PoolPreparation): Promise<void> {
    const key = `${module}\n${JSON.stringify(arg)}`;
    if (this.#prepared.has(key)) return;
    const answer = this.#next('prepared', () => `preparing ${module} in a rank thread`);
    this.worker.postMessage({ kind: 'prepare', module, arg } satisfies PoolRequest);
    await answer;
    this.#prepared.add(key);
  }

  lend(data: RankWorkerData): LentThread {
    const lent = new LentThread(this);
    this.#lent = lent;
    this.worker.ref();
    this.worker.postMessage({ kind: 'job', data } satisfies PoolRequest);
    return lent;
  }

  /** The job has this thread's outcome: it is free again, and an idle thread must not keep the process alive. */
  returned(): void {
    this.#lent = undefined;
    this.worker.unref();
  }
}

/** A bundle (rank-bundle.ts) the pool's threads start from: the pool bootstrap, the setup and the jobs' entry. */
export interface PoolBundle {
  worker: URL;
  setupUrl: string;
  entryUrl: string;
}

export interface RankThreadPoolOptions {
  /** Start threads with the TypeScript loader (tsx), for entries or prepared modules that are .ts. */
  typeScript?: boolean;
  /**
   * Start threads from this bundle instead, without a loader: every job's entry is the bundle's
   * (`entryUrl`), whatever entry `run` names, and a prepared module must be in the bundle too.
   */
  bundle?: PoolBundle;
}

export class RankThreadPool {
  readonly #bootstrap: RankBootstrap;
  readonly #bundle: PoolBundle | undefined;
  #idle: PooledThread[] = [];
  #closed = false;

  constructor(options: RankThreadPoolOptions = {}) {
    this.#bundle = options.bundle;
    if (this.#bundle) this.#bootstrap = bundleBootstrap(this.#bundle.worker);
    else {
      const url = new URL(`./pool-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);
      this.#bootstrap = { url, typeScript: options.typeScript === true || url.pathname.endsWith('.ts') };
    }
  }

  /** Threads alive in the pool and not lent to a job. */
  get idle(): number {
    return this.#idle.filter((t) => t.alive).length;
  }

  /**
   * spawnThreads(entry, options) on warm threads. With `prepare`, every thread
   * runs it once (the first job that asks) before the job starts, so loading
   * a module costs no job its time or its collective timeouts.
   */
  async run<R = unknown>(
    entry: string | URL,
    options: SpawnThreadsOptions,
    prepare?: PoolPreparation,
  ): Promise<R[]> {
    if (this.#closed) throw new InvalidStateError('RankThreadPool: run after close()');
    // Before any thread starts: a bad worldSize must not start a thousand of them.
    checkJobOptions(options.worldSize, options, 'RankThreadPool');
    const bundle = this.#bundle;
    const locate = bundle
      ? async () => ({ bootstrap: this.#bootstrap, setupUrl: bundle.setupUrl, entryModule: bundle.entryUrl })
      : undefined;
    // Ranks as tasks of one thread (`threads: 1`) start that thread themselves: no warm thread per rank.
    if (options.threads === 1 && options.worldSize !== 1)
      return runRankThreads<R>(entry, options, refuseThreadPerRank, 1, locate);
    const starting = Math.max(0, options.worldSize - this.idle);
    const perRank = options.rankThreadBytes ?? DEFAULT_RANK_THREAD_BYTES;
    checkThreadMemory(options.worldSize, perRank, 'RankThreadPool', starting);
    const threads = await this.#acquire(options.worldSize, prepare);
    let next = 0;
    try {
      // Its threads are started (and their memory checked) already: the job only borrows them.
      return await runRankThreads<R>(
        entry,
        options,
        (data, bootstrap) => {
          if (bootstrap.typeScript && !this.#bootstrap.typeScript) {
            throw new LaunchError(
              `RankThreadPool: ${data.entryUrl} needs the TypeScript loader; create the pool with typeScript: true`,
            );
          }
          return threads[next++].lend(data);
        },
        0,
        locate,
      );
    } finally {
      for (const thread of threads) this.#giveBack(thread);
    }
  }

  async #acquire(count: number, prepare: PoolPreparation | undefined): Promise<PooledThread[]> {
    this.#idle = this.#idle.filter((t) => t.alive);
    const setupUrl = this.#bundle?.setupUrl ?? rankSetupUrl();
    while (this.#idle.length < count) this.#idle.push(new PooledThread(this.#bootstrap, setupUrl, count));
    const threads = this.#idle.splice(0, count);
    try {
      await Promise.all(threads.map((t) => t.ready));
      if (prepare) await Promise.all(threads.map((t) => t.prepare(prepare)));
    } catch (error) {
      for (const thread of threads) this.#giveBack(thread);
      throw error;
    }
    return threads;
  }

  #giveBack(thread: PooledThread): void {
    if (!thread.alive) return;
    if (this.#closed) void thread.worker.terminate();
    else {
      thread.worker.unref();
      this.#idle.push(thread);
    }
  }

  /** Stops every idle thread (threads lent to a running job stop when it gives them back). */
  async close(): Promise<void> {
    this.#closed = true;
    const idle = this.#idle;
    this.#idle = [];
    await Promise.all(idle.map((t) => t.worker.terminate()));
  }
}

/** A job of tasks never starts a thread per rank. */
function refuseThreadPerRank(): never {
  throw new InvalidStateError('RankThreadPool: a job of ranks as tasks asked for a thread per rank');
}
