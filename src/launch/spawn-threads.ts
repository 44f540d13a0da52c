/**
 * spawnThreads: N ranks as worker threads of this process.
 *
 * worker_threads directly rather than piscina: a rank is one long-lived task
 * that must be told when a peer fails, terminated after a grace period, and
 * accounted for until its thread has exited. A pool's queueing, reuse and
 * idle handling would only stand between us and those lifecycle events.
 */
import { Worker } from 'node:worker_threads';
import { type DebugOptions, resolveJobDebug } from '../debug/options.ts';
import { mergeTraceParts } from '../debug/trace.ts';
import { AbortWord, NO_RANK } from '../runtime/abort-word.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { JobFailedError } from '../runtime/errors.ts';
import {
  checkJobOptions,
  describeFailures,
  failRunning,
  type JobShapeOptions,
  jobTimeoutMessage,
  type RankFailure,
} from './job-options.ts';
import { needsTypeScriptLoader, resolveEntry, typeScriptBootstrap } from './module-url.ts';
import { type RankReport, reviveError } from './rank-report.ts';
import { type JobOptions, type RankIdentity, type RankSetupModule, rankSetupUrl } from './rank-setup.ts';

export interface SpawnThreadsOptions extends JobShapeOptions {
  worldSize: number;
  /** Passed, structured-cloned, as the second argument of every rank's main. */
  args?: unknown;
  /** Compression, buffer pool, network emulation (loadClusterConfig); validated here, then `ctx.config` on every rank. */
  config?: ClusterConfig;
  /** Fingerprint checks, call sites, flight recorder, trace file (env TENSORCOMM_*; see docs/guides/debugging.md). */
  debug?: DebugOptions;
}

export interface RankWorkerData {
  identity: RankIdentity;
  entryUrl: string;
  setupUrl: string;
  args: unknown;
  abort: SharedArrayBuffer;
  shared: unknown;
  job: JobOptions;
}

/** A rank's outcome, and before it that the rank has loaded its modules and starts its main function. */
export type RankWorkerReport = RankReport | { kind: 'loaded' };

/**
 * Stopping a thread while a native addon initialises (koffi, lz4 and zstd load
 * with the library) aborts the whole process: node-addon-api treats the failed
 * napi_throw of a terminating thread as fatal. A thread that is still loading
 * is stopped once it has loaded, or after this long at the latest.
 */
const LOADING_STOP_MS = 10_000;

/** Resolves to the ranks' return values in rank order, or rejects naming every failed rank. */
export async function spawnThreads<R = unknown>(
  entry: string | URL,
  options: SpawnThreadsOptions,
): Promise<R[]> {
  const { worldSize } = options;
  const { names, devices, collectiveTimeoutMs, graceMs } = checkJobOptions(
    worldSize,
    options,
    'spawnThreads',
  );
  const entryUrl = resolveEntry(entry, 'spawnThreads').href;
  const setupUrl = rankSetupUrl();
  const setup = (await import(setupUrl)) as RankSetupModule;
  const job: JobOptions = {
    worldSize,
    collectiveTimeoutMs,
    config: options.config === undefined ? undefined : checkClusterConfig(options.config),
    debug: resolveJobDebug(options.debug, 'spawnThreads'),
  };
  const shared = setup.createJobShared(job);
  const abort = new AbortWord();
  const bootstrapUrl = new URL(
    `./rank-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  );
  const typeScript = needsTypeScriptLoader(entryUrl, bootstrapUrl.href);

  const results: unknown[] = new Array(worldSize);
  const failures: RankFailure[] = [];
  const settled = new Array<boolean>(worldSize).fill(false);
  let graceTimer: NodeJS.Timeout | undefined;

  const workers = names.map((name, rank) => {
    const data: RankWorkerData = {
      identity: { rank, worldSize, name, device: devices[rank], names, devices },
      entryUrl,
      setupUrl,
      args: options.args,
      abort: abort.buffer,
      shared,
      job,
    };
    return typeScript
      ? new Worker(typeScriptBootstrap(bootstrapUrl.href), { eval: true, workerData: data })
      : new Worker(bootstrapUrl, { workerData: data });
  });

  function fail(rank: number, error: Error): void {
    failures.push({ rank, error });
    if (abort.abort(rank, `rank ${rank} (${names[rank]}) failed: ${error.name}: ${error.message}`)) {
      setup.wakeJob(shared);
      graceTimer ??= setTimeout(terminateAll, graceMs);
    }
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
            if (settled[rank]) return;
            settled[rank] = true;
            if (report.kind === 'result') {
              results[rank] = report.value;
              // The rank is done; handles its code left open must not keep the job alive.
              void worker.terminate();
            } else fail(rank, reviveError(report.error));
          });
          worker.on('error', (error) => {
            if (settled[rank]) return;
            settled[rank] = true;
            fail(rank, error);
          });
          worker.on('exit', (code) => {
            if (!settled[rank]) {
              settled[rank] = true;
              fail(
                rank,
                new Error(`rank ${rank} (${names[rank]}) exited with code ${code} before returning`),
              );
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
