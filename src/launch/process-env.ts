/**
 * How a launched process learns who it is: the environment its engine set
 * (tensorcomm's launcher and torchrun alike: RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; or Open MPI's or Slurm's), and
 * the job description every rank reads from the rendezvous store.
 */
import { hostname } from 'node:os';
import type { ResolvedDebugOptions } from '../debug/options.ts';
import type { ResolvedPredictOptions } from '../predict/predict-options.ts';
import { generateRendezvousSecret, rendezvousSecretFromEnv, SECRET_ENV } from '../rendezvous/auth.ts';
import type { RendezvousClient } from '../rendezvous/client.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import type { Device } from '../tensor/dtype.ts';
import { LaunchError } from './errors.ts';
import { expandSlurmHosts } from './slurm-hosts.ts';

/** Who started the process, as its environment tells. */
export type RankEngine = 'tensorcomm' | 'torchrun' | 'openmpi' | 'slurm';

export interface ProcessEnv {
  engine: RankEngine;
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  /** Ranks with the same node id share a machine (docs/guides/many-nodes.md, the node rule). */
  nodeId: string;
  masterAddr: string;
  masterPort: number;
  /** Started by launchProcesses / `tensorcomm run`, which serves the rendezvous and owns the job directory. */
  launched: boolean;
  /** The launcher's job directory for this node (STORE_DIR_ENV); ranks another engine started make their own. */
  storeDir?: string;
}

/** Set by the launcher; without it rank 0 serves the rendezvous and creates the job itself. */
export const LAUNCHER_ENV = 'TENSORCOMM_LAUNCHER';

/** The launcher's job directory on the rank's node. */
export const STORE_DIR_ENV = 'TENSORCOMM_STORE_DIR';

/** Rendezvous key of the job description, set by whoever serves the rendezvous. */
export const JOB_KEY = 'tensorcomm/job';

export interface ProcessJobInfo {
  jobId: string;
  /**
   * The network store's secret when the user gave none (the rendezvous, and so
   * the whole job, is then on loopback). With TENSORCOMM_RENDEZVOUS_SECRET every
   * rank authenticates with that instead, and no secret travels.
   */
  secret?: string;
  names: string[];
  devices: Device[];
  collectiveTimeoutMs: number;
  config?: ClusterConfig;
  /** The launcher's resolved debugging options, so options given in code reach every rank. */
  debug?: ResolvedDebugOptions;
  /** Predict mode, resolved by node 0's launcher (topology spec, absolute output paths). */
  predict?: ResolvedPredictOptions;
}

/**
 * The rendezvous secret of a job a tensorcomm launcher serves: the user's
 * TENSORCOMM_RENDEZVOUS_SECRET, else, for a job of one node, a fresh random
 * one, so that even on loopback another local user can neither join the
 * job's rendezvous nor flood it. The launcher hands it to its ranks in their
 * environment (processEnvFor), which only the same user can read. Launchers
 * of several nodes cannot share a secret one of them makes up: those need
 * the user's (required off loopback anyway).
 */
export function launchSecret(nnodes: number): string | undefined {
  return rendezvousSecretFromEnv() ?? (nnodes === 1 ? generateRendezvousSecret() : undefined);
}

/** What whoever serves the rendezvous puts in the job description for the network store (ProcessJobInfo.secret). */
export function jobSecret(): string | undefined {
  return rendezvousSecretFromEnv() === undefined ? generateRendezvousSecret() : undefined;
}

/** The secret a rank's network store authenticates with: the user's, else the job description's. */
export function networkSecret(job: ProcessJobInfo): string {
  const secret = rendezvousSecretFromEnv() ?? job.secret;
  if (secret === undefined) {
    throw new LaunchError(
      `initProcess: the job description has no secret and ${SECRET_ENV} is not set: set it on every node`,
    );
  }
  return secret;
}

/** Whoever serves the rendezvous publishes the job; every rank reads it. */
export function publishJob(client: RendezvousClient, job: ProcessJobInfo): Promise<void> {
  return client.set(JOB_KEY, JSON.stringify(job));
}

export async function fetchJob(client: RendezvousClient): Promise<ProcessJobInfo> {
  return JSON.parse(new TextDecoder().decode(await client.get(JOB_KEY))) as ProcessJobInfo;
}

/** torchrun's and MPI's usual rendezvous port, when the engine gives none. */
export const DEFAULT_MASTER_PORT = 29500;

const HOW_TO_START =
  "start the script with 'tensorcomm run', torchrun, mpirun or srun (or set RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number {
  const text = env[name];
  if (text === undefined || text === '') {
    throw new LaunchError(`initProcess: environment variable ${name} is not set; ${HOW_TO_START}`);
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`initProcess: ${name}=${JSON.stringify(text)} must be an integer in ${min}..${max}`);
  }
  return value;
}

const MAX_WORLD_SIZE = 4096;

/** The variables each engine sets, in the order they are looked for. */
const ENGINES = {
  torchrun: {
    marker: 'RANK',
    rank: 'RANK',
    size: 'WORLD_SIZE',
    localRank: 'LOCAL_RANK',
    localSize: 'LOCAL_WORLD_SIZE',
  },
  openmpi: {
    marker: 'OMPI_COMM_WORLD_RANK',
    rank: 'OMPI_COMM_WORLD_RANK',
    size: 'OMPI_COMM_WORLD_SIZE',
    localRank: 'OMPI_COMM_WORLD_LOCAL_RANK',
    localSize: 'OMPI_COMM_WORLD_LOCAL_SIZE',
  },
  slurm: {
    marker: 'SLURM_PROCID',
    rank: 'SLURM_PROCID',
    size: 'SLURM_NTASKS',
    localRank: 'SLURM_LOCALID',
    localSize: 'SLURM_NTASKS_PER_NODE',
  },
} as const;

function engineOf(env: NodeJS.ProcessEnv): keyof typeof ENGINES {
  for (const engine of Object.keys(ENGINES) as Array<keyof typeof ENGINES>) {
    if (env[ENGINES[engine].marker] !== undefined && env[ENGINES[engine].marker] !== '') return engine;
  }
  // torchrun's names give the clearest message about what is missing.
  return 'torchrun';
}

/** MASTER_ADDR, else under Slurm the first host of the job, else this machine. */
function masterAddrOf(env: NodeJS.ProcessEnv, engine: keyof typeof ENGINES): string {
  if (env.MASTER_ADDR) return env.MASTER_ADDR;
  if (engine === 'slurm' && env.SLURM_JOB_NODELIST) return expandSlurmHosts(env.SLURM_JOB_NODELIST)[0];
  return '127.0.0.1';
}

/**
 * Who this process is, from the environment of whichever engine started it:
 * tensorcomm's launcher and torchrun / Kubernetes (RANK, WORLD_SIZE, …), Open
 * MPI's mpirun (OMPI_COMM_WORLD_*) or Slurm's srun (SLURM_*).
 */
export function readProcessEnv(env: NodeJS.ProcessEnv = process.env, host = hostname()): ProcessEnv {
  const engine = engineOf(env);
  const names = ENGINES[engine];
  const worldSize = integer(env, names.size, 1, MAX_WORLD_SIZE);
  const rank = integer(env, names.rank, 0, worldSize - 1);
  const localRank = env[names.localRank] ? integer(env, names.localRank, 0, worldSize - 1) : rank;
  const launched = env[LAUNCHER_ENV] === '1';
  // Slurm's tasks-per-node may read "2(x3)": only a plain count is a local world size.
  const localSizeText = env[names.localSize];
  const localWorldSize =
    localSizeText && /^\d+$/.test(localSizeText)
      ? integer(env, names.localSize, localRank + 1, worldSize)
      : worldSize;
  const portGiven = env.MASTER_PORT !== undefined && env.MASTER_PORT !== '';
  return {
    engine: launched ? 'tensorcomm' : engine,
    rank,
    worldSize,
    localRank,
    localWorldSize,
    nodeId: env.TENSORCOMM_NODE_ID || env.SLURM_NODEID || host,
    masterAddr: masterAddrOf(env, engine),
    masterPort:
      portGiven || engine === 'torchrun' ? integer(env, 'MASTER_PORT', 1, 65535) : DEFAULT_MASTER_PORT,
    launched,
    storeDir: env[STORE_DIR_ENV] || undefined,
  };
}

/** The node rule's id; a launcher gives its ranks `<jobId>/node<K>`, so "same node" means "same launcher". */
export const NODE_ID_ENV = 'TENSORCOMM_NODE_ID';

/** Where a launched rank sits in the job, and what its node's launcher made for it. */
export interface LaunchedRank {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  nodeRank: number;
  /** Where the rendezvous is, and the secret it asks for (launchSecret), if any. */
  master: { host: string; port: number; secret?: string };
  storeDir: string;
  nodeId: string;
}

/** The environment a tensorcomm launcher gives a rank: torchrun's variables and its own. */
export function processEnvFor(r: LaunchedRank): Record<string, string> {
  return {
    RANK: String(r.rank),
    WORLD_SIZE: String(r.worldSize),
    LOCAL_RANK: String(r.localRank),
    LOCAL_WORLD_SIZE: String(r.localWorldSize),
    GROUP_RANK: String(r.nodeRank),
    MASTER_ADDR: r.master.host,
    MASTER_PORT: String(r.master.port),
    [LAUNCHER_ENV]: '1',
    [STORE_DIR_ENV]: r.storeDir,
    [NODE_ID_ENV]: r.nodeId,
    ...(r.master.secret === undefined ? {} : { [SECRET_ENV]: r.master.secret }),
  };
}
