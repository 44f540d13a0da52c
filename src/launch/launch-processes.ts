/**
 * launchProcesses: one node's ranks as processes of this machine (what
 * `tensorcomm run` does), for a job of one node or of several, one launcher
 * each (job-nodes.ts). Node 0's launcher serves the rendezvous and publishes
 * the job; every launcher creates its own node's job directory, starts its
 * ranks with torchrun's environment, prefixes their output with the global
 * rank, and owns the end of its part of the job: a rank failing anywhere
 * aborts the job on every node (every waiting rank is told who failed), the
 * ranks still running are stopped (SIGTERM, then SIGKILL), and each node's
 * files are removed once its ranks have exited.
 */
import { randomUUID } from 'node:crypto';
import { readEarlyExit } from '../debug/early-exit.ts';
import { type DebugOptions, resolveJobDebug } from '../debug/options.ts';
import { readTraceParts, type TraceShare, writeTrace } from '../debug/trace.ts';
import { checkPredictOptions, type PredictOptions } from '../predict/predict-options.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { checkOptionKeys } from '../runtime/option-keys.ts';
import { type Device, parseDevice } from '../tensor/dtype.ts';
import { LaunchError } from './errors.ts';
import { JobNodes, type NodeFailure } from './job-nodes.ts';
import {
  checkJobOptions,
  DEFAULT_COLLECTIVE_TIMEOUT_MS,
  JOB_SHAPE_KEYS,
  type JobShapeOptions,
  jobFailure,
  type RankFailure,
} from './job-options.ts';
import { resolveEntry, typeScriptLoaderUrl } from './module-url.ts';
import { fetchJob, jobSecret, type ProcessJobInfo, processEnvFor, publishJob } from './process-env.ts';
import { rankBundle } from './rank-bundle.ts';
import { type OutputSink, RankProcesses } from './rank-processes.ts';
import { loadProcessSetup, processSetupUrl } from './rank-setup.ts';
import { rankV8Flags } from './rank-v8-flags.ts';
import { packTensors } from './tensor-transfer.ts';

export type { OutputSink, ProcessMessage } from './rank-processes.ts';

/**
 * Options of {@link launchProcesses}; see the [processes guide](../../docs/guides/processes.md) and, for a
 * job of several nodes, the [many-nodes guide](../../docs/guides/many-nodes.md).
 */
export interface LaunchOptions extends JobShapeOptions {
  /** Rank processes on this node (torchrun's `--nproc-per-node`). */
  nproc: number;
  /**
   * Nodes of the job, one launcher each; the world is nnodes × nproc ranks.
   *
   * @defaultValue 1
   */
  nnodes?: number;
  /**
   * This launcher's node, 0..nnodes-1: rank = nodeRank × nproc + local rank.
   *
   * @defaultValue 0
   */
  nodeRank?: number;
  /**
   * How long in milliseconds the launchers of a job of several nodes wait for each other at the start.
   *
   * @defaultValue 300 000 (5 minutes)
   */
  joinTimeoutMs?: number;
  /**
   * This node's ranks' devices, one per local rank: `'cpu'` or `'cuda:N'`; node i's list is that of ranks
   * i × nproc on.
   *
   * @defaultValue every rank on `'cpu'`
   */
  devices?: Device[];
  /**
   * For an entry with a default export `main(ctx, args)`: its second argument, structured-cloned (Tensors
   * arrive as Tensors). `tensorcomm run --args '<json>'` passes it from the command line.
   */
  args?: unknown;
  /** The script's own command line (`process.argv.slice(2)` in the script). */
  scriptArgs?: string[];
  /**
   * Compression, buffer pool, network emulation ({@link loadClusterConfig}); validated here, then
   * `ctx.config` on every rank.
   */
  config?: ClusterConfig;
  /** Extra environment variables for every rank. */
  env?: Record<string, string>;
  /**
   * Where rank output goes: prefixed with `[rank N]` on this process's stdout/stderr, or a callback.
   *
   * @defaultValue `'prefix'`
   */
  output?: 'prefix' | OutputSink;
  /**
   * Address node 0's rendezvous store binds to, and every node reaches (anything but loopback needs
   * `TENSORCOMM_RENDEZVOUS_SECRET`).
   *
   * @defaultValue `'127.0.0.1'`
   */
  masterAddr?: string;
  /**
   * Its port: required with several nodes.
   *
   * @defaultValue a free port
   */
  masterPort?: number;
  /**
   * Fingerprint checks, call sites, flight recorder, trace file, hang reports (see the
   * [debugging guide](../../docs/guides/debugging.md)).
   *
   * @defaultValue what the environment says (`TENSORCOMM_CHECKS`, `TENSORCOMM_TRACE`, …)
   */
  debug?: DebugOptions;
  /** Aborting it stops the job as if a rank had failed (the CLI wires SIGINT/SIGTERM here). */
  signal?: AbortSignal;
  /** Predict the job's time on a topology (see {@link SpawnThreadsOptions.predict}); node 0's launcher's counts. */
  predict?: PredictOptions;
}

const LAUNCH_KEYS = {
  ...JOB_SHAPE_KEYS,
  nproc: true,
  nnodes: true,
  nodeRank: true,
  joinTimeoutMs: true,
  args: true,
  scriptArgs: true,
  config: true,
  env: true,
  output: true,
  masterAddr: true,
  masterPort: true,
  debug: true,
  signal: true,
  predict: true,
} as const satisfies Record<keyof LaunchOptions, true>;

/** One wait (and one key list) per node bounds how many a job may have. */
const MAX_NODES = 1024;

const printPrefixed: OutputSink = (rank, line, stream) => {
  (stream === 'stdout' ? process.stdout : process.stderr).write(`[rank ${rank}] ${line}\n`);
};

function integerIn(value: number, name: string, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max)
    throw new RangeError(`launchProcesses: ${name} must be an integer in ${min}..${max}, got ${value}`);
  return value;
}

/** The job's shape across nodes, checked. */
function checkNodes(options: LaunchOptions) {
  const nnodes = integerIn(options.nnodes ?? 1, 'nnodes', 1, MAX_NODES);
  const nodeRank = integerIn(options.nodeRank ?? 0, 'nodeRank', 0, nnodes - 1);
  if (nnodes > 1 && options.masterPort === undefined) {
    throw new RangeError(
      'launchProcesses: a job of several nodes needs masterPort, the port node 0 serves the rendezvous on, the same on every node',
    );
  }
  const joinTimeoutMs = options.joinTimeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS;
  if (!(joinTimeoutMs > 0))
    throw new RangeError(`launchProcesses: joinTimeoutMs must be positive, got ${joinTimeoutMs}`);
  if (options.devices !== undefined && options.devices.length !== options.nproc) {
    throw new RangeError(
      `launchProcesses: devices has ${options.devices.length} entries for nproc ${options.nproc} (one per rank of this node)`,
    );
  }
  const devices = (options.devices ?? Array.from({ length: options.nproc }, () => 'cpu' as const)).map((d) =>
    parseDevice(d, 'launchProcesses'),
  );
  return { nnodes, nodeRank, joinTimeoutMs, devices, worldSize: nnodes * options.nproc };
}

/** A recorded failure of another node, as this launcher lists it: as a rank's error crosses to its launcher (reviveError). */
function otherNodeFailures(failure: NodeFailure): RankFailure[] {
  return failure.failures.map(({ rank, name, message, code }) => {
    const error = new Error(message);
    error.name = name;
    if (code !== undefined) Object.assign(error, { code });
    return { rank, error };
  });
}

/** An error's string `code`, as a field to spread into a NodeFailure's entry: nothing when it has none. */
function codeOf(error: Error): { code?: string } {
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? { code } : {};
}

/**
 * Resolves to the results of this node's ranks, in local rank order
 * (undefined for scripts without a default export): with one node, every
 * rank's in rank order. Rejects with a JobFailedError naming the failed
 * ranks of every node this launcher knows of, root cause first.
 */
export async function launchProcesses<R = unknown>(
  script: string | URL,
  options: LaunchOptions,
): Promise<R[]> {
  const where = 'launchProcesses';
  checkOptionKeys(options, LAUNCH_KEYS, where);
  const { nnodes, nodeRank, joinTimeoutMs, devices, worldSize } = checkNodes(options);
  // Names are the whole world's; devices this node's, checked by checkNodes.
  const checked = checkJobOptions(worldSize, { ...options, devices: undefined }, where);
  const { graceMs } = checked;
  const entryUrl = resolveEntry(script, where).href;
  const packedArgs = packTensors(options.args);
  const config = options.config === undefined ? undefined : checkClusterConfig(options.config);
  const debug = resolveJobDebug(options.debug, where);
  const predict = checkPredictOptions(options.predict, worldSize, where);
  const setupUrl = processSetupUrl();
  const setup = await loadProcessSetup();
  const bootstrap = new URL(
    `./process-rank${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  );
  // TypeScript (an entry, or this library's own sources under vitest or tsx) is bundled once, as for
  // rank threads, rather than transpiled by a tsx loader in every rank process: one file to load, no
  // loader to start. Where it cannot be bundled the ranks load it through tsx, as they are.
  const loader = typeScriptLoaderUrl(entryUrl, bootstrap.href);
  const bundle = loader === undefined ? undefined : await rankBundle(bootstrap.href, setupUrl, entryUrl);
  const sink = typeof options.output === 'function' ? options.output : printPrefixed;
  const nproc = options.nproc;
  const localRanks = Array.from({ length: nproc }, (_, local) => nodeRank * nproc + local);

  const nodes = await JobNodes.join({
    nnodes,
    nodeRank,
    nproc,
    devices,
    host: options.masterAddr ?? '127.0.0.1',
    port: options.masterPort ?? 0,
    joinTimeoutMs,
    signal: options.signal,
  });
  let storeDir: string | undefined;
  let ranks: RankProcesses | undefined;
  let failure: unknown;
  try {
    // Node 0 describes the job for every node; the others take its id for their own directories.
    let job: ProcessJobInfo;
    if (nodeRank === 0) {
      const jobId = randomUUID().slice(0, 8);
      storeDir = setup.createProcessJob(jobId);
      job = {
        jobId,
        secret: jobSecret(),
        names: checked.names,
        devices: nodes.devices,
        collectiveTimeoutMs: checked.collectiveTimeoutMs,
        config,
        debug,
        predict,
      };
      await publishJob(nodes.client, job);
    } else {
      job = await nodes.untilOtherNodeFails(fetchJob(nodes.client));
      storeDir = setup.createProcessJob(job.jobId);
    }
    const dir = storeDir;
    const nodeId = `${job.jobId}/node${nodeRank}`;
    const names = job.names;
    // What other nodes read about this node's failures says where they happened.
    const onNode = ` (on node ${nodeRank})`;
    ranks = new RankProcesses({
      bootstrap: bundle?.worker ?? bootstrap,
      execArgv: [
        ...(bundle ? ['--enable-source-maps'] : loader ? ['--import', loader] : []),
        ...rankV8Flags(nproc, options.env?.NODE_OPTIONS ?? process.env.NODE_OPTIONS),
      ],
      scriptArgs: options.scriptArgs ?? [],
      ranks: localRanks,
      worldSize,
      names,
      env: (rank) => ({
        ...process.env,
        ...options.env,
        ...processEnvFor({
          rank,
          worldSize,
          localRank: rank - nodeRank * nproc,
          localWorldSize: nproc,
          nodeRank,
          master: nodes.master,
          storeDir: dir,
          nodeId,
        }),
        TENSORCOMM_ENTRY: bundle?.entryUrl ?? entryUrl,
        TENSORCOMM_PROCESS_SETUP: bundle?.setupUrl ?? setupUrl,
      }),
      args: packedArgs,
      sink,
      graceMs,
      abortRanks: (message, failedRank) => setup.abortProcessJob(dir, message, failedRank),
      earlyExit: (rank) => readEarlyExit(dir, rank),
      onOwnAbort: (reason, causes) =>
        void nodes.record({
          node: nodeRank,
          reason: `${reason}${onNode}`,
          failures: causes.map(({ rank, error }) => ({
            rank,
            name: error.name,
            message: `${error.message}${onNode}`,
            ...codeOf(error),
          })),
        }),
    });
    const local = ranks;
    nodes.onOtherNodeFailure((f) => local.stopForOtherNode(f.reason, otherNodeFailures(f)));

    const onAbortSignal = () =>
      local.stopRunning(`job stopped by the launcher (${String(options.signal?.reason ?? 'aborted')})`);
    options.signal?.addEventListener('abort', onAbortSignal, { once: true });
    if (options.signal?.aborted) onAbortSignal();
    const timeoutMs = options.timeoutMs;
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => local.timeOut(timeoutMs), timeoutMs);

    await ranks.closed;
    clearTimeout(timer);
    // This node's part of the trace goes to node 0, which writes the job's one trace file.
    const trace = job.debug?.trace;
    const share = trace === undefined ? undefined : readTraceParts(trace, localRanks);
    // Stopped while waiting for the other nodes, this launcher still tells them (stopRunning records it).
    const { shares, ended } = await nodes.finish(nodeRank === 0 || !share ? '' : JSON.stringify(share)).then(
      (texts) => ({ shares: texts, ended: undefined }),
      (e: Error) => ({ shares: [], ended: e }),
    );
    // A node that could not hand its part over keeps it in a trace of its own.
    if (trace && share && (nodeRank === 0 || ended)) {
      const others = shares.filter((text) => text !== '').map((text) => JSON.parse(text) as TraceShare);
      writeTrace(trace, [share, ...others], worldSize);
    }
    options.signal?.removeEventListener('abort', onAbortSignal);
    if (ranks.failures.length > 0) throw jobFailure(ranks.failures, names);
    if (ended) throw ended;
    if (options.signal?.aborted)
      throw new LaunchError(
        `job stopped by the launcher (${String(options.signal.reason)}) after this node's ranks were done`,
      );
    return ranks.results as R[];
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    ranks?.kill();
    // Another node's failure was recorded by that node; one of this node's, by its ranks' abort.
    await nodes.close(ranks === undefined ? failure : undefined);
    if (storeDir !== undefined) setup.removeProcessJob(storeDir);
  }
}
