/**
 * spawnThreads: N ranks as worker threads of this process.
 *
 * worker_threads directly rather than piscina: a rank is one long-lived task
 * that must be told when a peer fails, terminated after a grace period, and
 * accounted for until its thread has exited. A pool's queueing, reuse and
 * idle handling would only stand between us and those lifecycle events.
 */
import { Worker } from 'node:worker_threads';
import { type Device, parseDevice } from '../tensor/dtype.ts';
import { AbortWord, NO_RANK } from './abort-word.ts';
import type { ClusterConfig } from './config/cluster-config.ts';
import { checkClusterConfig } from './config/load.ts';
import { JobFailedError } from './errors.ts';
import { needsTypeScriptLoader, resolveEntry, typeScriptBootstrap } from './module-url.ts';
import { type JobOptions, type RankIdentity, type RankSetupModule, rankSetupUrl } from './rank-setup.ts';

export interface SpawnThreadsOptions {
  worldSize: number;
  /** Passed, structured-cloned, as the second argument of every rank's main. */
  args?: unknown;
  /** Compression, buffer pool, network emulation (loadClusterConfig); validated here, then `ctx.config` on every rank. */
  config?: ClusterConfig;
  /** Worker names for p2p (default `rank-${i}`). */
  names?: string[];
  devices?: Device[];
  /** Whole-job timeout: past it every rank is aborted and the promise rejects. */
  timeoutMs?: number;
  /** Default timeout of each collective / store wait inside the job. */
  collectiveTimeoutMs?: number;
  /** How long ranks get to unwind after an abort before their threads are terminated. */
  graceMs?: number;
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

export type RankWorkerReport =
  | { kind: 'result'; value: unknown }
  | { kind: 'error'; error: { name: string; message: string; stack: string } };

const DEFAULT_COLLECTIVE_TIMEOUT_MS = 300_000;
const DEFAULT_GRACE_MS = 2_000;
const MAX_WORLD_SIZE = 4096;

function checkOptions(
  options: SpawnThreadsOptions,
): Required<Pick<SpawnThreadsOptions, 'names' | 'devices'>> {
  const { worldSize } = options;
  if (!Number.isSafeInteger(worldSize) || worldSize < 1 || worldSize > MAX_WORLD_SIZE) {
    throw new RangeError(
      `spawnThreads: worldSize must be an integer in 1..${MAX_WORLD_SIZE}, got ${worldSize}`,
    );
  }
  const names = options.names ?? Array.from({ length: worldSize }, (_, i) => `rank-${i}`);
  if (names.length !== worldSize) {
    throw new RangeError(`spawnThreads: names has ${names.length} entries for worldSize ${worldSize}`);
  }
  const duplicate = names.find((n, i) => names.indexOf(n) !== i);
  if (duplicate !== undefined)
    throw new RangeError(`spawnThreads: worker name ${JSON.stringify(duplicate)} is used twice`);
  const devices = (options.devices ?? Array.from({ length: worldSize }, () => 'cpu' as const)).map((d) =>
    parseDevice(d, 'spawnThreads'),
  );
  if (devices.length !== worldSize) {
    throw new RangeError(`spawnThreads: devices has ${devices.length} entries for worldSize ${worldSize}`);
  }
  for (const key of ['timeoutMs', 'collectiveTimeoutMs', 'graceMs'] as const) {
    const value = options[key];
    if (value !== undefined && !(value > 0))
      throw new RangeError(`spawnThreads: ${key} must be positive, got ${value}`);
  }
  return { names, devices };
}

function reviveError(report: { name: string; message: string; stack: string }): Error {
  const error = new Error(report.message);
  error.name = report.name;
  error.stack = report.stack;
  return error;
}

/** Resolves to the ranks' return values in rank order, or rejects naming every failed rank. */
export async function spawnThreads<R = unknown>(
  entry: string | URL,
  options: SpawnThreadsOptions,
): Promise<R[]> {
  const { names, devices } = checkOptions(options);
  const { worldSize } = options;
  const entryUrl = resolveEntry(entry, 'spawnThreads').href;
  const setupUrl = rankSetupUrl();
  const setup = (await import(setupUrl)) as RankSetupModule;
  const job: JobOptions = {
    worldSize,
    collectiveTimeoutMs: options.collectiveTimeoutMs ?? options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS,
    config: options.config === undefined ? undefined : checkClusterConfig(options.config),
  };
  const shared = setup.createJobShared(job);
  const abort = new AbortWord();
  const bootstrapUrl = new URL(
    `./rank-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  );
  const typeScript = needsTypeScriptLoader(entryUrl, bootstrapUrl.href);

  const results: unknown[] = new Array(worldSize);
  const failures: Array<{ rank: number; error: Error }> = [];
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
      graceTimer ??= setTimeout(terminateAll, options.graceMs ?? DEFAULT_GRACE_MS);
    }
  }

  function terminateAll(): void {
    for (const w of workers) void w.terminate();
  }

  const jobTimer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          const running = workers.map((_, r) => r).filter((r) => !settled[r]);
          const message = `job timed out after ${options.timeoutMs} ms; ranks still running: ${running.join(', ')}`;
          for (const r of running) failures.push({ rank: r, error: new Error(`rank ${r}: ${message}`) });
          running.forEach((r) => {
            settled[r] = true;
          });
          if (abort.abort(NO_RANK, message)) setup.wakeJob(shared);
          graceTimer ??= setTimeout(terminateAll, options.graceMs ?? DEFAULT_GRACE_MS);
        }, options.timeoutMs);

  await Promise.all(
    workers.map(
      (worker, rank) =>
        new Promise<void>((resolveExit) => {
          worker.on('message', (report: RankWorkerReport) => {
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
  if (failures.length > 0) throw jobFailure(failures, names);
  return results as R[];
}

function jobFailure(
  failures: Array<{ rank: number; error: Error }>,
  names: readonly string[],
): JobFailedError {
  // The first failure is the root cause; the others are usually its echoes.
  const lines = failures.map(
    ({ rank, error }) => `  rank ${rank} (${names[rank]}): ${error.name}: ${error.message}`,
  );
  return new JobFailedError(
    `${failures.length} rank(s) failed: ${failures.map((f) => f.rank).join(', ')}\n${lines.join('\n')}`,
    failures,
  );
}
