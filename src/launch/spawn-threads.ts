/**
 * spawnThreads: N ranks as worker threads of this process.
 *
 * worker_threads directly rather than piscina: a rank is one long-lived task
 * that must be told when a peer fails, terminated after a grace period, and
 * accounted for until its thread has exited. A pool's queueing, reuse and
 * idle handling would only stand between us and those lifecycle events.
 */

import { type ResourceLimits, Worker } from 'node:worker_threads';
import { registeredOpNames } from '../debug/call-record.ts';
import { type DebugOptions, resolveJobDebug } from '../debug/options.ts';
import { mergeTraceParts } from '../debug/trace.ts';
import { checkPredictOptions, type PredictOptions } from '../predict/predict-options.ts';
import { AbortWord } from '../runtime/abort-word.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { type ChaosOptions, checkChaos, checkFaults, type FaultSpec } from '../runtime/faults/options.ts';
import { checkOptionKeys } from '../runtime/option-keys.ts';
import { rankThreadsStarting } from '../runtime/v8-tiering.ts';
import { checkJobOptions, JOB_SHAPE_KEYS, type JobShapeOptions, jobFailure } from './job-options.ts';
import {
  needsTypeScriptLoader,
  resolveEntry,
  sourceMapsBootstrap,
  typeScriptBootstrap,
} from './module-url.ts';
import { rankBundle } from './rank-bundle.ts';
import { type JobOptions, loadRankSetup, type RankIdentity, rankSetupUrl } from './rank-setup.ts';
import { type RankThread, RankThreads } from './rank-threads.ts';
import { scriptLoaderFor } from './script-chunks.ts';
import { ranksAsTasks } from './task-options.ts';
import { rankTasksOn } from './task-thread.ts';
import { packTensors } from './tensor-transfer.ts';
import { checkThreadMemory, DEFAULT_RANK_THREAD_BYTES, rankResourceLimits } from './thread-memory.ts';

/** Options of {@link spawnThreads}; see the [threads guide](../../docs/guides/threads.md#options). */
export interface SpawnThreadsOptions extends JobShapeOptions {
  /** How many ranks the job has: one worker thread each, ranks 0 to worldSize - 1 (at most 4096). */
  worldSize: number;
  /**
   * Passed, structured-cloned, as the second argument of every rank's `main(ctx, args)`; Tensors in it
   * arrive as Tensors.
   */
  args?: unknown;
  /**
   * Compression, buffer pool, network emulation (`loadClusterConfig`, see the
   * [P2P guide](../../docs/guides/p2p-and-compression.md)); validated here, then `ctx.config` on every rank.
   */
  config?: ClusterConfig;
  /**
   * Fingerprint checks, call sites, flight recorder, trace file (see the
   * [debugging guide](../../docs/guides/debugging.md)).
   *
   * @defaultValue what the environment says (`TENSORCOMM_CHECKS`, `TENSORCOMM_TRACE`, …)
   */
  debug?: DebugOptions;
  /**
   * Failures to inject into ranks' calls (see [fault injection](../../docs/guides/testing.md#fault-injection)).
   * A rank an injected `exit` or `hang` takes out is lost on purpose: it does not fail the job, and its
   * result is undefined.
   */
  faults?: FaultSpec[];
  /** Seeded random delays before every communication call, the same for the same seed (see [chaos](../../docs/guides/testing.md#chaos)). */
  chaos?: ChaosOptions;
  /**
   * Memory in bytes one rank thread is expected to need. A worldSize whose threads would not fit in the
   * memory available is refused before any thread starts; 0 skips the check.
   *
   * @defaultValue 48 MiB, an idle rank's, rounded up
   */
  rankThreadBytes?: number;
  /**
   * Predict the job's time on a topology (see the [prediction guide](../../docs/guides/prediction.md)):
   * results stay exact, every rank keeps a virtual clock (`ctx.predict`), and the report and trace say
   * what each call would take there.
   */
  predict?: PredictOptions;
  /**
   * How many worker threads carry the ranks: `worldSize`, one each, or 1, every rank an async task of one
   * thread, so a job of thousands of ranks (a prediction of a cluster) fits in memory. No other count is
   * supported. Tasks of one thread take turns, so ranks compute one at a time, and they must not block the
   * thread (a synchronous wait for a peer never ends); GPUs and injected `exit` or `hang` faults need a
   * thread per rank (see the [threads guide](../../docs/guides/threads.md#ranks-as-tasks-of-one-thread)).
   *
   * @defaultValue worldSize
   */
  threads?: number;
}

const SPAWN_THREADS_KEYS = {
  ...JOB_SHAPE_KEYS,
  worldSize: true,
  args: true,
  config: true,
  debug: true,
  faults: true,
  chaos: true,
  rankThreadBytes: true,
  predict: true,
  threads: true,
} as const satisfies Record<keyof SpawnThreadsOptions, true>;

export interface RankWorkerData {
  identity: RankIdentity;
  /** The entry as the job names it (in messages), and the module the rank imports for it (its bundle's, if bundled). */
  entryUrl: string;
  entryModule: string;
  setupUrl: string;
  args: unknown;
  abort: SharedArrayBuffer;
  /**
   * One Int32: the job's ranks that have not yet finished. The last to finish writes the code caches
   * (rank-worker.ts): writing them gives V8 other flags for a moment, in every thread of the process.
   */
  unfinished: SharedArrayBuffer;
  shared: unknown;
  job: JobOptions;
}

export type StartRankThread = (data: RankWorkerData, bootstrap: RankBootstrap) => RankThread;
/**
 * The module a rank thread starts from, and whether it needs the TypeScript loader (tsx), or is a
 * bundle (rank-bundle.ts) whose source maps stack traces should follow.
 */
export interface RankBootstrap {
  url: URL;
  typeScript: boolean;
  bundled?: boolean;
  /** A bundle's CommonJS loader, where its bootstrap was converted (script-chunks.ts): threads start without ES modules. */
  scriptLoader?: string;
}

/** How threads start from a bundle's bootstrap `url` (looked up once, not per thread). */
export function bundleBootstrap(url: URL): RankBootstrap {
  return { url, typeScript: false, bundled: true, scriptLoader: scriptLoaderFor(url) };
}

/** Where a job's rank threads load their modules from. */
export interface RankModules {
  bootstrap: RankBootstrap;
  setupUrl: string;
  entryModule: string;
}

export function rankWorkerUrl(): URL {
  return new URL(`./rank-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);
}

/** A rank thread's Worker, started from `bootstrap` with `workerData`. */
export function startRankWorker(
  { url, typeScript, bundled, scriptLoader }: RankBootstrap,
  workerData: unknown,
  resourceLimits: ResourceLimits | undefined,
): Worker {
  if (typeScript)
    return new Worker(typeScriptBootstrap(url.href), { eval: true, workerData, resourceLimits });
  if (bundled) {
    return new Worker(sourceMapsBootstrap(url.href, scriptLoader), {
      eval: true,
      workerData,
      resourceLimits,
    });
  }
  return new Worker(url, { workerData, resourceLimits });
}

function startWorker(data: RankWorkerData, bootstrap: RankBootstrap): RankThread {
  return startRankWorker(bootstrap, data, rankResourceLimits(data.identity.worldSize));
}

/** The job's modules as they are: the rank bootstrap beside this module, tsx when any is TypeScript. */
export async function unbundledModules(entryUrl: string, setupUrl: string): Promise<RankModules> {
  const url = rankWorkerUrl();
  return {
    bootstrap: { url, typeScript: needsTypeScriptLoader(entryUrl, url.href) },
    setupUrl,
    entryModule: entryUrl,
  };
}

/** The job's modules bundled once (rank-bundle.ts), or as they are where they cannot be. */
async function bundledModules(entryUrl: string, setupUrl: string): Promise<RankModules> {
  const bundle = await rankBundle(rankWorkerUrl().href, setupUrl, entryUrl);
  if (bundle === undefined) return unbundledModules(entryUrl, setupUrl);
  return {
    bootstrap: bundleBootstrap(bundle.worker),
    setupUrl: bundle.setupUrl,
    entryModule: bundle.entryUrl,
  };
}

/** Resolves to the ranks' return values in rank order, or rejects naming every failed rank. */
export function spawnThreads<R = unknown>(entry: string | URL, options: SpawnThreadsOptions): Promise<R[]> {
  return runRankThreads<R>(entry, options, startWorker, options.worldSize, bundledModules);
}

/**
 * spawnThreads on threads from `start`, which starts `starting` new ones (a pool lends warm ones)
 * loading the modules `locate` says.
 */
export async function runRankThreads<R = unknown>(
  entry: string | URL,
  options: SpawnThreadsOptions,
  start: StartRankThread,
  starting: number,
  locate: (entryUrl: string, setupUrl: string) => Promise<RankModules> = unbundledModules,
): Promise<R[]> {
  checkOptionKeys(options, SPAWN_THREADS_KEYS, 'spawnThreads');
  const { worldSize } = options;
  const { names, devices, collectiveTimeoutMs, graceMs } = checkJobOptions(
    worldSize,
    options,
    'spawnThreads',
  );
  const tasks = ranksAsTasks(options, devices);
  const perRank = options.rankThreadBytes ?? DEFAULT_RANK_THREAD_BYTES;
  checkThreadMemory(worldSize, perRank, 'spawnThreads', tasks ? 1 : starting);
  const entryUrl = resolveEntry(entry, 'spawnThreads').href;
  const packedArgs = packTensors(options.args);
  const setupUrl = rankSetupUrl();
  const setup = await loadRankSetup();
  const job: JobOptions = {
    worldSize,
    collectiveTimeoutMs,
    config: options.config === undefined ? undefined : checkClusterConfig(options.config),
    debug: resolveJobDebug(options.debug, 'spawnThreads'),
    // The setup module loaded the op table: its names are what a fault's `op` may say.
    faults: checkFaults(options.faults, { worldSize, ops: registeredOpNames() }, 'spawnThreads'),
    chaos: checkChaos(options.chaos, 'spawnThreads'),
    predict: checkPredictOptions(options.predict, worldSize, 'spawnThreads'),
    ...(tasks && { tasks }),
  };
  const { bootstrap, setupUrl: rankSetup, entryModule } = await locate(entryUrl, setupUrl);
  const shared = setup.createJobShared(job);
  const abort = new AbortWord();

  // The threads start and load under V8's own flags, which the caches of Node's built-in modules and of
  // the bundle were made under; the ranks turn tiering on past their start-up barrier (v8-tiering.ts).
  const threadsExited = rankThreadsStarting();
  const unfinished = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  new Int32Array(unfinished)[0] = worldSize;
  try {
    const dataOf = (rank: number): RankWorkerData => ({
      identity: { rank, worldSize, name: names[rank], device: devices[rank], names, devices },
      entryUrl,
      entryModule,
      setupUrl: rankSetup,
      args: packedArgs,
      abort: abort.buffer,
      unfinished,
      shared,
      job,
    });
    // One thread carries every rank as a task: rank 0's data says whose job it is.
    const threads = tasks
      ? rankTasksOn(startRankWorker(bootstrap, dataOf(0), undefined), worldSize)
      : names.map((_, rank) => start(dataOf(rank), bootstrap));
    const ranks = new RankThreads(threads, { names, graceMs, abort, wake: () => setup.wakeJob(shared) });
    const { timeoutMs } = options;
    const jobTimer =
      timeoutMs === undefined ? undefined : setTimeout(() => ranks.timeOut(timeoutMs), timeoutMs);
    await ranks.exited;
    clearTimeout(jobTimer);
    ranks.clearTimers();
    // Ranks wrote their calls as parts when they closed; one file with a track per rank is what tools open.
    if (job.debug?.trace) mergeTraceParts(job.debug.trace, worldSize);
    if (ranks.failures.length > 0) throw jobFailure(ranks.failures, names);
    return ranks.results as R[];
  } finally {
    threadsExited();
  }
}
