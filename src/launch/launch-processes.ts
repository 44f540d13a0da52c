/**
 * launchProcesses: N ranks as processes of this machine (what `tensorcomm run`
 * does). The launcher serves the rendezvous store, creates the job's shared
 * directory, starts every rank with torchrun's environment, prefixes their
 * output with the rank, and owns the end of the job: when a rank fails it
 * aborts the job (every waiting rank is told who failed), stops the others
 * (SIGTERM, then SIGKILL), and removes the job's files once all have exited.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { type DebugOptions, resolveJobDebug } from '../debug/options.ts';
import { mergeTraceParts } from '../debug/trace.ts';
import { RendezvousClient } from '../rendezvous/client.ts';
import { RendezvousServer } from '../rendezvous/server.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { JobFailedError } from '../runtime/errors.ts';
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
import { resolveEntry, typeScriptLoaderUrl } from './module-url.ts';
import { type ProcessJobInfo, processEnvFor, publishJob } from './process-env.ts';
import { type RankReport, reviveError } from './rank-report.ts';
import { type ProcessSetupModule, processSetupUrl } from './rank-setup.ts';
import { packTensors, unpackTensors } from './tensor-transfer.ts';

export type OutputSink = (rank: number, line: string, stream: 'stdout' | 'stderr') => void;

export interface LaunchOptions extends JobShapeOptions {
  nproc: number;
  /** For an entry with a default export main(ctx, args): its second argument (structured-cloned). */
  args?: unknown;
  /** The script's own command line (process.argv.slice(2) in the script). */
  scriptArgs?: string[];
  /** Compression, buffer pool, network emulation (loadClusterConfig); validated here, then `ctx.config` on every rank. */
  config?: ClusterConfig;
  /** Extra environment variables for every rank. */
  env?: Record<string, string>;
  /** Where rank output goes: prefixed with `[rank N]` on this process's stdout/stderr (default), or a callback. */
  output?: 'prefix' | OutputSink;
  /** Address the rendezvous store binds to (default 127.0.0.1; anything else needs a shared secret). */
  masterAddr?: string;
  masterPort?: number;
  /** Fingerprint checks, call sites, flight recorder, trace file, hang reports (env TENSORCOMM_*; docs/guides/debugging.md). */
  debug?: DebugOptions;
  /** Aborting it stops the job as if a rank had failed (the CLI wires SIGINT/SIGTERM here). */
  signal?: AbortSignal;
}

const LAUNCH_KEYS = {
  ...JOB_SHAPE_KEYS,
  nproc: true,
  args: true,
  scriptArgs: true,
  config: true,
  env: true,
  output: true,
  masterAddr: true,
  masterPort: true,
  debug: true,
  signal: true,
} as const satisfies Record<keyof LaunchOptions, true>;

export type ProcessMessage = { kind: 'start'; args: unknown } | RankReport;

function exitDescription(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `was killed by ${signal}` : `exited with code ${code}`;
}

function prefixOutput(child: ChildProcess, rank: number, sink: OutputSink): void {
  for (const stream of ['stdout', 'stderr'] as const) {
    const source = child[stream];
    if (source)
      createInterface({ input: source, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) =>
        sink(rank, line, stream),
      );
  }
}

const printPrefixed: OutputSink = (rank, line, stream) => {
  (stream === 'stdout' ? process.stdout : process.stderr).write(`[rank ${rank}] ${line}\n`);
};

/** Resolves to the ranks' results in rank order (undefined for scripts without a default export). */
export async function launchProcesses<R = unknown>(
  script: string | URL,
  options: LaunchOptions,
): Promise<R[]> {
  checkOptionKeys(options, LAUNCH_KEYS, 'launchProcesses');
  const worldSize = options.nproc;
  const { names, devices, collectiveTimeoutMs, graceMs } = checkJobOptions(
    worldSize,
    options,
    'launchProcesses',
  );
  const entryUrl = resolveEntry(script, 'launchProcesses').href;
  const packedArgs = packTensors(options.args);
  const config = options.config === undefined ? undefined : checkClusterConfig(options.config);
  const debug = resolveJobDebug(options.debug, 'launchProcesses');
  const setupUrl = processSetupUrl();
  const setup = (await import(setupUrl)) as ProcessSetupModule;
  const bootstrap = new URL(
    `./process-rank${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  );
  const loader = typeScriptLoaderUrl(entryUrl, bootstrap.href);
  const sink = typeof options.output === 'function' ? options.output : printPrefixed;

  const jobId = randomUUID().slice(0, 8);
  const storeDir = setup.createProcessJob(jobId);
  let server: RendezvousServer | undefined;
  const children: ChildProcess[] = [];
  try {
    server = await RendezvousServer.start({ host: options.masterAddr, port: options.masterPort ?? 0 });
    const job: ProcessJobInfo = { jobId, storeDir, names, devices, collectiveTimeoutMs, config, debug };
    const client = await RendezvousClient.connect({ host: server.host, port: server.port });
    try {
      await publishJob(client, job);
    } finally {
      client.close();
    }

    const results: unknown[] = new Array(worldSize);
    const failures: RankFailure[] = [];
    const settled = new Array<boolean>(worldSize).fill(false);
    const exited = new Array<boolean>(worldSize).fill(false);
    let aborted = false;
    const timers: NodeJS.Timeout[] = [];

    const stopRunning = (signal: NodeJS.Signals) => {
      children.forEach((child, rank) => {
        if (!exited[rank]) child.kill(signal);
      });
    };
    const abortJob = (message: string, failedRank: number | undefined) => {
      if (aborted) return;
      aborted = true;
      setup.abortProcessJob(storeDir, message, failedRank);
      timers.push(setTimeout(() => stopRunning('SIGTERM'), graceMs));
      timers.push(setTimeout(() => stopRunning('SIGKILL'), 2 * graceMs));
    };
    const fail = (rank: number, error: Error) => {
      failures.push({ rank, error });
      abortJob(`rank ${rank} (${names[rank]}) failed: ${error.name}: ${error.message}`, rank);
    };

    for (let rank = 0; rank < worldSize; rank++) {
      const child = fork(bootstrap, options.scriptArgs ?? [], {
        execArgv: loader ? ['--import', loader] : [],
        env: {
          ...process.env,
          ...options.env,
          ...processEnvFor(rank, worldSize, { host: server.host, port: server.port }),
          TENSORCOMM_ENTRY: entryUrl,
          TENSORCOMM_PROCESS_SETUP: setupUrl,
        },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        serialization: 'advanced',
      });
      children.push(child);
      prefixOutput(child, rank, sink);
    }

    const onAbortSignal = () => {
      const message = `job stopped by the launcher (${String(options.signal?.reason ?? 'aborted')})`;
      failRunning(settled, failures, message);
      abortJob(message, undefined);
    };
    options.signal?.addEventListener('abort', onAbortSignal, { once: true });
    if (options.signal?.aborted) onAbortSignal();

    if (options.timeoutMs !== undefined) {
      const timeoutMs = options.timeoutMs;
      timers.push(
        setTimeout(() => {
          const message = jobTimeoutMessage(timeoutMs, settled);
          failRunning(settled, failures, message);
          abortJob(message, undefined);
        }, timeoutMs),
      );
    }

    await Promise.all(
      children.map(
        (child, rank) =>
          new Promise<void>((resolveExit) => {
            child.send({ kind: 'start', args: packedArgs } satisfies ProcessMessage, (error) => {
              // A child that died before reading its start message is reported by 'exit'.
              if (error && !exited[rank]) child.kill('SIGKILL');
            });
            child.on('message', (report: RankReport) => {
              if (settled[rank]) return;
              settled[rank] = true;
              if (report.kind === 'result') results[rank] = unpackTensors(report.value);
              else fail(rank, reviveError(report.error));
            });
            child.on('error', (error) => {
              if (settled[rank]) return;
              settled[rank] = true;
              fail(rank, error);
            });
            child.on('close', resolveExit);
            child.on('exit', (code, signal) => {
              exited[rank] = true;
              if (!settled[rank] || (code !== 0 && !failures.some((f) => f.rank === rank))) {
                settled[rank] = true;
                if (code !== 0 || signal)
                  fail(rank, new Error(`rank ${rank} (${names[rank]}) ${exitDescription(code, signal)}`));
              }
            });
          }),
      ),
    );
    for (const timer of timers) clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbortSignal);
    if (debug.trace) mergeTraceParts(debug.trace, worldSize);
    if (failures.length > 0) throw new JobFailedError(describeFailures(failures, names), failures);
    return results as R[];
  } finally {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await server?.close();
    setup.removeProcessJob(storeDir);
  }
}
