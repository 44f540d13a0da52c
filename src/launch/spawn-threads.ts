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
import { AbortWord, NO_RANK } from '../runtime/abort-word.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { JobFailedError } from '../runtime/errors.ts';
import type { LostHow } from '../runtime/faults/injector.ts';
import { type ChaosOptions, checkChaos, checkFaults, type FaultSpec } from '../runtime/faults/options.ts';
import { tuneRankTiering } from '../runtime/v8-tiering.ts';
import {
  checkJobOptions,
  checkOptionKeys,
  describeFailures,
  failRunning,
  JOB_SHAPE_KEYS,
  type JobShapeOptions,
  jobTimeoutMessage,
  type RankFailure,
} from './job-options.ts';
import {
  needsTypeScriptLoader,
  resolveEntry,
  sourceMapsBootstrap,
  typeScriptBootstrap,
} from './module-url.ts';
import { rankBundle } from './rank-bundle.ts';
import { type RankReport, reviveError } from './rank-report.ts';
import { type JobOptions, loadRankSetup, type RankIdentity, rankSetupUrl } from './rank-setup.ts';
import { scriptLoaderFor } from './script-chunks.ts';
import { packTensors, unpackTensors } from './tensor-transfer.ts';
import { checkThreadMemory, DEFAULT_RANK_THREAD_BYTES, rankResourceLimits } from './thread-memory.ts';

export interface SpawnThreadsOptions extends JobShapeOptions {
  worldSize: number;
  /** Passed, structured-cloned, as the second argument of every rank's main. */
  args?: unknown;
  /** Compression, buffer pool, network emulation (loadClusterConfig); validated here, then `ctx.config` on every rank. */
  config?: ClusterConfig;
  /** Fingerprint checks, call sites, flight recorder, trace file (env TENSORCOMM_*; see docs/guides/debugging.md). */
  debug?: DebugOptions;
  /**
   * Failures to inject into ranks' calls (docs/guides/testing.md). A rank an injected `exit` or `hang`
   * takes out is lost on purpose: it does not fail the job, and its result is undefined.
   */
  faults?: FaultSpec[];
  /** Seeded random delays before every communication call, the same for the same seed. */
  chaos?: ChaosOptions;
  /**
   * Memory one rank thread is expected to need (default 48 MiB, an idle rank's as measured). A worldSize
   * whose threads would not fit in the memory available is refused before any thread starts; 0 skips
   * the check.
   */
  rankThreadBytes?: number;
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
} as const satisfies Record<keyof SpawnThreadsOptions, true>;

export interface RankWorkerData {
  identity: RankIdentity;
  /** The entry as the job names it (in messages), and the module the rank imports for it (its bundle's, if bundled). */
  entryUrl: string;
  entryModule: string;
  setupUrl: string;
  args: unknown;
  abort: SharedArrayBuffer;
  shared: unknown;
  job: JobOptions;
}

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
  // Before the thread compiles anything: V8 accepts a code cache only under the flags it was made
  // with, and a flag first set by a rank (after its chunks loaded) had every later process reject them.
  tuneRankTiering();
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

/**
 * Stopping a thread while a native addon initialises (koffi loads with the
 * library, lz4 and zstd when first used) aborts the whole process: node-addon-api treats the failed
 * napi_throw of a terminating thread as fatal. A thread that is still loading
 * is stopped once it has loaded, or after this long at the latest.
 */
const LOADING_STOP_MS = 10_000;

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
  const perRank = options.rankThreadBytes ?? DEFAULT_RANK_THREAD_BYTES;
  checkThreadMemory(worldSize, perRank, 'spawnThreads', starting);
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
  };
  const { bootstrap, setupUrl: rankSetup, entryModule } = await locate(entryUrl, setupUrl);
  const shared = setup.createJobShared(job);
  const abort = new AbortWord();

  const results: unknown[] = new Array(worldSize);
  const failures: RankFailure[] = [];
  const settled = new Array<boolean>(worldSize).fill(false);
  let graceTimer: NodeJS.Timeout | undefined;

  const workers = names.map((name, rank) => {
    const data: RankWorkerData = {
      identity: { rank, worldSize, name, device: devices[rank], names, devices },
      entryUrl,
      entryModule,
      setupUrl: rankSetup,
      args: packedArgs,
      abort: abort.buffer,
      shared,
      job,
    };
    return start(data, bootstrap);
  });

  function abortJob(rank: number, message: string): void {
    if (abort.abort(rank, message)) {
      setup.wakeJob(shared);
      graceTimer ??= setTimeout(terminateAll, graceMs);
    }
  }

  function fail(rank: number, error: Error): void {
    failures.push({ rank, error });
    // The first line: a hang report in the rest is the failed rank's to print, not every peer's.
    abortJob(rank, `rank ${rank} (${names[rank]}) failed: ${error.name}: ${error.message.split('\n')[0]}`);
  }

  /** Ranks an injected fault took out on purpose: not failures, and ended once nobody else runs. */
  const lost = new Map<number, LostHow>();
  function endLostOnceOthersDone(): void {
    if (lost.size === 0 || settled.some((done, rank) => !done && !lost.has(rank))) return;
    abortJob(NO_RANK, 'the job is over: every rank that no injected fault took out has finished');
  }

  const loaded = new Array<boolean>(worldSize).fill(false);
  const stopWhenLoaded = new Set<number>();
  const lastResortTimers: NodeJS.Timeout[] = [];

  function stop(rank: number): void {
    if (loaded[rank]) {
      void workers[rank].terminate();
      return;
    }
    if (stopWhenLoaded.has(rank)) return;
    stopWhenLoaded.add(rank);
    lastResortTimers.push(setTimeout(() => void workers[rank].terminate(), LOADING_STOP_MS));
  }

  function terminateAll(): void {
    for (let rank = 0; rank < worldSize; rank++) stop(rank);
  }

  const { timeoutMs } = options;
  const jobTimer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          const message = jobTimeoutMessage(timeoutMs, settled);
          failRunning(settled, failures, message);
          if (abort.abort(NO_RANK, message)) setup.wakeJob(shared);
          graceTimer ??= setTimeout(terminateAll, graceMs);
        }, timeoutMs);

  await Promise.all(
    workers.map(
      (worker, rank) =>
        new Promise<void>((resolveExit) => {
          worker.on('message', (report: RankWorkerReport) => {
            if (report.kind === 'loaded') {
              loaded[rank] = true;
              if (stopWhenLoaded.has(rank)) void worker.terminate();
              return;
            }
            if (report.kind === 'lost') {
              lost.set(rank, report.how);
              endLostOnceOthersDone();
              return;
            }
            if (settled[rank]) return;
            settled[rank] = true;
            // A hung rank unwinds once the job ends it; what it reports then is not the job's outcome.
            if (lost.has(rank)) void worker.terminate();
            else if (report.kind === 'result') {
              results[rank] = unpackTensors(report.value);
              // The rank is done; handles its code left open must not keep the job alive.
              void worker.terminate();
            } else fail(rank, reviveError(report.error));
            endLostOnceOthersDone();
          });
          worker.on('error', (error) => {
            if (settled[rank]) return;
            settled[rank] = true;
            if (!lost.has(rank)) fail(rank, error);
            endLostOnceOthersDone();
          });
          worker.on('exit', (code) => {
            if (!settled[rank]) {
              settled[rank] = true;
              const exited = `rank ${rank} (${names[rank]}) exited with code ${code} before returning`;
              // Peers learn of an injected crash as of a real one; only the job does not count it.
              if (lost.get(rank) === 'exit') abortJob(rank, `${exited} (an injected fault)`);
              else if (!lost.has(rank)) fail(rank, new Error(exited));
              endLostOnceOthersDone();
            }
            resolveExit();
          });
        }),
    ),
  );
  clearTimeout(jobTimer);
  clearTimeout(graceTimer);
  for (const timer of lastResortTimers) clearTimeout(timer);
  // Ranks wrote their calls as parts when they closed; one file with a track per rank is what tools open.
  if (job.debug?.trace) mergeTraceParts(job.debug.trace, worldSize);
  if (failures.length > 0) throw jobFailure(failures, names);
  return results as R[];
}

function jobFailure(failures: RankFailure[], names: readonly string[]): JobFailedError {
  return new JobFailedError(describeFailures(failures, names), failures);
}
