/**
 * RankContext for ranks that are processes of one machine: the same groups and
 * collectives as thread ranks, over a FileTensorStore in the job's directory.
 * Ranks find the job through the rendezvous store, served by the launcher
 * (`tensorcomm run`, launchProcesses) or, when the processes were started some
 * other way with torchrun's environment, by rank 0.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installProcessMonitor } from '../debug/process-monitor.ts';
import {
  abortJob,
  cleanupStaleJobDirectories,
  createJobDirectory,
  FileTensorStore,
  removeJobDirectory,
} from '../file-store/index.ts';
import { checkJobOptions, DEFAULT_COLLECTIVE_TIMEOUT_MS } from '../launch/job-options.ts';
import {
  fetchJob,
  type ProcessEnv,
  type ProcessJobInfo,
  publishJob,
  readProcessEnv,
} from '../launch/process-env.ts';
import { RendezvousClient } from '../rendezvous/client.ts';
import { RendezvousServer } from '../rendezvous/server.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { parseDevice } from '../tensor/dtype.ts';
import { checkOneNode } from './one-node.ts';
import { buildRankContext, type RankContext } from './rank-context.ts';

export function createProcessJob(jobId: string): string {
  cleanupStaleJobDirectories();
  return createJobDirectory({ jobId });
}

export function abortProcessJob(storeDir: string, message: string, failedRank: number | undefined): void {
  abortJob(storeDir, { message, failedRank });
}

export function removeProcessJob(storeDir: string): void {
  removeJobDirectory(storeDir);
}

export interface InitProcessOptions {
  /** How long to wait for the rendezvous and the other ranks (default: the job's collective timeout). */
  timeoutMs?: number;
}

function checkJob(job: ProcessJobInfo, env: ProcessEnv): ProcessJobInfo {
  const fine =
    typeof job.storeDir === 'string' &&
    Array.isArray(job.names) &&
    job.names.length === env.worldSize &&
    Array.isArray(job.devices) &&
    job.devices.length === env.worldSize &&
    job.collectiveTimeoutMs > 0;
  if (!fine) {
    throw new Error(
      `initProcess: the job description from the rendezvous at ${env.masterAddr}:${env.masterPort} does not fit WORLD_SIZE=${env.worldSize}; was it started by another job?`,
    );
  }
  return { ...job, devices: job.devices.map((d) => parseDevice(d, 'initProcess')) };
}

/** Without a launcher, rank 0 describes the job itself: default names and devices, a new job directory. */
function hostedJob(env: ProcessEnv, collectiveTimeoutMs: number): ProcessJobInfo {
  const jobId = `${process.pid}`;
  const { names, devices } = checkJobOptions(env.worldSize, {}, 'initProcess');
  return { jobId, storeDir: createProcessJob(jobId), names, devices, collectiveTimeoutMs };
}

async function connect(options: InitProcessOptions): Promise<RankContext> {
  const env = readProcessEnv();
  const timeoutMs = options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS;
  const hosting = !env.launched && env.rank === 0;
  const server = hosting
    ? await RendezvousServer.start({ host: env.masterAddr, port: env.masterPort })
    : undefined;
  let client: RendezvousClient | undefined;
  try {
    client = await RendezvousClient.connect({
      host: env.masterAddr,
      port: env.masterPort,
      timeoutMs,
      rank: env.rank,
    });
    // A tensorcomm launcher starts all of its ranks on its own machine.
    if (!env.launched) await checkOneNode(client, env, timeoutMs);
  } catch (error) {
    client?.close();
    await server?.close();
    throw error;
  }
  if (hosting) await publishJob(client, hostedJob(env, timeoutMs));
  const job = checkJob(await fetchJob(client), env);
  const store = new FileTensorStore({
    dir: job.storeDir,
    rank: env.rank,
    timeoutMs: job.collectiveTimeoutMs,
  });
  // The job directory goes with the job: hang reports must outlive it.
  installProcessMonitor(
    env.rank,
    env.worldSize,
    job.storeDir,
    { ...job.debug, hangReportDir: job.debug?.hangReportDir ?? join(tmpdir(), 'tensorcomm-hang-reports') },
    job.names,
  );
  await client.barrier('tensorcomm/start', env.worldSize, { timeoutMs });
  const identity = {
    rank: env.rank,
    worldSize: env.worldSize,
    name: job.names[env.rank],
    device: job.devices[env.rank],
    names: job.names,
    devices: job.devices,
  };
  const jobOptions = {
    worldSize: env.worldSize,
    collectiveTimeoutMs: job.collectiveTimeoutMs,
    config: job.config === undefined ? undefined : checkClusterConfig(job.config),
  };
  return buildRankContext(identity, store, jobOptions, async () => {
    if (server) {
      // Rank 0 owns the job here: it may remove the directory only once nobody uses it.
      await client.barrier('tensorcomm/end', env.worldSize, { timeoutMs });
      removeJobDirectory(job.storeDir);
    } else if (!env.launched) {
      await client.barrier('tensorcomm/end', env.worldSize, { timeoutMs });
    }
    client.close();
    await server?.close();
  });
}

let context: Promise<RankContext> | undefined;

/**
 * This process's rank context (torch's init_process_group): the same
 * RankContext as thread ranks get. Built once; later calls return it.
 */
export function initProcess(options: InitProcessOptions = {}): Promise<RankContext> {
  context ??= connect(options).then((ctx) => {
    const close = ctx.close.bind(ctx);
    let closing: Promise<void> | undefined;
    ctx.close = (failure?: unknown) => {
      closing ??= close(failure);
      return closing;
    };
    // A script that never closes its context still releases it when it runs out of work.
    process.once('beforeExit', () => void ctx.close());
    return ctx;
  });
  return context;
}
