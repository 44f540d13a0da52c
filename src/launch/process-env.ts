/**
 * How a launched process learns who it is: torchrun's environment variables
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * and the job description every rank reads from the rendezvous store.
 */
import type { ResolvedDebugOptions } from '../debug/options.ts';
import type { RendezvousClient } from '../rendezvous/client.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import type { Device } from '../tensor/dtype.ts';

export interface ProcessEnv {
  rank: number;
  worldSize: number;
  localRank: number;
  masterAddr: string;
  masterPort: number;
  /** Started by launchProcesses / `tensorcomm run`, which serves the rendezvous and owns the job directory. */
  launched: boolean;
}

/** Set by the launcher; without it rank 0 serves the rendezvous and creates the job itself. */
export const LAUNCHER_ENV = 'TENSORCOMM_LAUNCHER';

/** Rendezvous key of the job description, set by whoever serves the rendezvous. */
export const JOB_KEY = 'tensorcomm/job';

export interface ProcessJobInfo {
  jobId: string;
  storeDir: string;
  names: string[];
  devices: Device[];
  collectiveTimeoutMs: number;
  config?: ClusterConfig;
  /** The launcher's resolved debugging options, so options given in code reach every rank. */
  debug?: ResolvedDebugOptions;
}

/** Whoever serves the rendezvous publishes the job; every rank reads it. */
export function publishJob(client: RendezvousClient, job: ProcessJobInfo): Promise<void> {
  return client.set(JOB_KEY, JSON.stringify(job));
}

export async function fetchJob(client: RendezvousClient): Promise<ProcessJobInfo> {
  return JSON.parse(new TextDecoder().decode(await client.get(JOB_KEY))) as ProcessJobInfo;
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number {
  const text = env[name];
  if (text === undefined || text === '') {
    throw new Error(
      `initProcess: environment variable ${name} is not set; start the script with 'tensorcomm run'`,
    );
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`initProcess: ${name}=${JSON.stringify(text)} must be an integer in ${min}..${max}`);
  }
  return value;
}

export function readProcessEnv(env: NodeJS.ProcessEnv = process.env): ProcessEnv {
  const worldSize = integer(env, 'WORLD_SIZE', 1, 4096);
  const rank = integer(env, 'RANK', 0, worldSize - 1);
  return {
    rank,
    worldSize,
    localRank: env.LOCAL_RANK ? integer(env, 'LOCAL_RANK', 0, worldSize - 1) : rank,
    masterAddr: env.MASTER_ADDR || '127.0.0.1',
    masterPort: integer(env, 'MASTER_PORT', 1, 65535),
    launched: env[LAUNCHER_ENV] === '1',
  };
}

export function processEnvFor(
  rank: number,
  worldSize: number,
  master: { host: string; port: number },
): Record<string, string> {
  return {
    RANK: String(rank),
    WORLD_SIZE: String(worldSize),
    LOCAL_RANK: String(rank),
    LOCAL_WORLD_SIZE: String(worldSize),
    MASTER_ADDR: master.host,
    MASTER_PORT: String(master.port),
    [LAUNCHER_ENV]: '1',
  };
}
