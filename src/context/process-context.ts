/**
 * RankContext for ranks that are processes of one machine: the same groups and
 * collectives as thread ranks, over a FileTensorStore in the job's directory
 * (shared-memory rings between the node's ranks, files for the rest).
 * Ranks find the job through the rendezvous store, served by the launcher
 * (`tensorcomm run`, launchProcesses) or, when the processes were started some
 * other way with torchrun's environment, by rank 0.
 */
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileStatusBoard } from '../debug/file-status-board.ts';
import { installProcessMonitor } from '../debug/process-monitor.ts';
import {
  abortJob,
  cleanupStaleJobDirectories,
  createJobDirectory,
  FileTensorStore,
  readJobAbort,
  removeJobDirectory,
} from '../file-store/index.ts';
import { LaunchError } from '../launch/errors.ts';
import { checkJobOptions, DEFAULT_COLLECTIVE_TIMEOUT_MS } from '../launch/job-options.ts';
import {
  fetchJob,
  jobSecret,
  networkSecret,
  type ProcessEnv,
  type ProcessJobInfo,
  publishJob,
  readProcessEnv,
  STORE_DIR_ENV,
} from '../launch/process-env.ts';
import { NetworkTensorStore } from '../network-store/index.ts';
import { RendezvousClient } from '../rendezvous/client.ts';
import { RendezvousServer } from '../rendezvous/server.ts';
import { checkClusterConfig } from '../runtime/config/load.ts';
import { SPIN_MS, YIELD_AFTER_MS } from '../runtime/spin-policy.ts';
import type { TensorStore } from '../runtime/tensor-store.ts';
import { setSpinBudget } from '../runtime/wait.ts';
import { parseDevice } from '../tensor/dtype.ts';
import { registerInterruptCheck } from '../tensor/interrupt.ts';
import { listenAddress } from './listen-address.ts';
import { checkMasterSecret, explainUnreachableMaster } from './master-checks.ts';
import { exchangeNodeIds, type NodeMap } from './node-map.ts';
import { NodeRoutedStore } from './node-routed-store.ts';
import { type PeerWatch, watchNodePeers } from './peer-watch.ts';
import { buildRankContext, type RankContext } from './rank-context.ts';
import { dropHandedPart, handTracePart, writeJobTrace } from './trace-handover.ts';

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
  /**
   * How long in milliseconds to wait for the rendezvous and the other ranks.
   *
   * @defaultValue 300 000 (5 minutes): a rank 0 on a slow-starting machine may take that long to get there
   */
  timeoutMs?: number;
}

function checkJob(job: ProcessJobInfo, env: ProcessEnv): ProcessJobInfo {
  const fine =
    typeof job.jobId === 'string' &&
    (job.secret === undefined || typeof job.secret === 'string') &&
    Array.isArray(job.names) &&
    job.names.length === env.worldSize &&
    Array.isArray(job.devices) &&
    job.devices.length === env.worldSize &&
    job.collectiveTimeoutMs > 0;
  if (!fine) {
    throw new LaunchError(
      `initProcess: the job description from the rendezvous at ${env.masterAddr}:${env.masterPort} does not fit WORLD_SIZE=${env.worldSize}; was it started by another job?`,
    );
  }
  return { ...job, devices: job.devices.map((d) => parseDevice(d, 'initProcess')) };
}

/** Without a launcher, rank 0 describes the job itself: default names and devices, the secret. */
function hostedJob(env: ProcessEnv, collectiveTimeoutMs: number): ProcessJobInfo {
  const { names, devices } = checkJobOptions(env.worldSize, {}, 'initProcess');
  return { jobId: `${process.pid}`, secret: jobSecret(), names, devices, collectiveTimeoutMs };
}

/** This node's job directory, and whether this rank made it (and so removes it at the end). */
interface NodeDirectory {
  dir: string;
  owned: boolean;
}

/**
 * A launcher hands its ranks their node's directory; ranks another engine
 * started get one from their node's leader (its lowest rank), which makes it.
 */
async function nodeDirectory(
  client: RendezvousClient,
  env: ProcessEnv,
  job: ProcessJobInfo,
  nodes: NodeMap,
  timeoutMs: number,
): Promise<NodeDirectory> {
  if (env.launched) {
    if (!env.storeDir) throw new LaunchError(`initProcess: the launcher set no ${STORE_DIR_ENV}`);
    return { dir: env.storeDir, owned: false };
  }
  const leader = nodes.ranksWith(env.rank)[0];
  const key = `tensorcomm/node-dir/${leader}`;
  if (leader === env.rank) {
    const dir = createProcessJob(`${job.jobId}-n${nodes.indexOf(env.rank)}`);
    await client.set(key, dir);
    return { dir, owned: true };
  }
  return { dir: new TextDecoder().decode(await client.get(key, { timeoutMs })), owned: false };
}

const addressKey = (rank: number) => `tensorcomm/network-store/${rank}`;

/** Spinning on the rings or sockets pays only while every rank of this machine has a core of its own. */
function spinPays(machineRanks: readonly number[]): boolean {
  return machineRanks.length <= availableParallelism();
}

/** This rank's network store, connected to every rank of the other nodes. */
async function networkStore(
  client: RendezvousClient,
  env: ProcessEnv,
  job: ProcessJobInfo,
  nodes: NodeMap,
  timeoutMs: number,
): Promise<NetworkTensorStore> {
  const host = await listenAddress({ host: env.masterAddr, port: env.masterPort });
  const store = await NetworkTensorStore.listen({
    rank: env.rank,
    jobId: job.jobId,
    secret: networkSecret(job),
    timeoutMs: job.collectiveTimeoutMs,
    host,
    spin: spinPays(nodes.ranksOnHost(env.rank)),
  });
  try {
    await client.set(addressKey(env.rank), JSON.stringify(store.address));
    const peers = [];
    for (let r = 0; r < env.worldSize; r++) {
      if (nodes.sameNode(r, env.rank)) continue;
      const address = JSON.parse(
        new TextDecoder().decode(await client.get(addressKey(r), { timeoutMs })),
      ) as { host: string; port: number };
      peers.push({ rank: r, ...address });
    }
    await store.connect(peers, { timeoutMs });
    return store;
  } catch (error) {
    store.close();
    throw error;
  }
}

async function connect(options: InitProcessOptions): Promise<RankContext> {
  const env = readProcessEnv();
  checkMasterSecret(env);
  // Ranks another engine started get the full default to reach rank 0, though
  // a rank 0 that died first keeps them waiting that long: an engine starts its
  // tasks together, yet rank 0's machine may take minutes to get there (a
  // container image to pull, a cold shared filesystem, a pod scheduled late),
  // and a deadline short enough to matter would fail such healthy jobs. Ending
  // the job at the first failure is the engine's part (srun --kill-on-bad-exit=1;
  // torchrun and mpirun do it unasked), and a rank 0 refusing for want of a
  // secret is caught above, on every rank at once.
  const timeoutMs = options.timeoutMs ?? DEFAULT_COLLECTIVE_TIMEOUT_MS;
  const hosting = !env.launched && env.rank === 0;
  const server = hosting
    ? await RendezvousServer.start({ host: env.masterAddr, port: env.masterPort })
    : undefined;
  let client: RendezvousClient | undefined;
  let node: NodeDirectory | undefined;
  let store: TensorStore | undefined;
  let watch: PeerWatch | undefined;
  try {
    client = await RendezvousClient.connect({
      host: env.masterAddr,
      port: env.masterPort,
      timeoutMs,
      rank: env.rank,
    }).catch((error: unknown) => {
      // A launcher serves its ranks' rendezvous; it reports its own failures.
      throw env.launched || hosting ? error : explainUnreachableMaster(error, env);
    });
    if (hosting) await publishJob(client, hostedJob(env, timeoutMs));
    const job = checkJob(await fetchJob(client), env);
    const nodes = await exchangeNodeIds(client, env.rank, env.worldSize, env.nodeId, timeoutMs);
    node = await nodeDirectory(client, env, job, nodes, timeoutMs);
    // A launcher supervises its ranks itself.
    if (!env.launched) {
      const peers = nodes.ranksWith(env.rank).filter((r) => r !== env.rank);
      const watched = peers.map((r) => ({ rank: r, pid: nodes.pids[r] }));
      watch = watchNodePeers(node.dir, watched, job.names);
    }
    const nodeRanks = nodes.ranksWith(env.rank);
    // Waits on the node's shared memory (the mailboxes) spin only while every rank of the machine has a
    // core, and then as the rings' waits do: as long, giving the core away past their first moments.
    setSpinBudget(nodes.ranksOnHost(env.rank).length / availableParallelism(), SPIN_MS, YIELD_AFTER_MS);
    const near = new FileTensorStore({
      dir: node.dir,
      rank: env.rank,
      timeoutMs: job.collectiveTimeoutMs,
      rings: { ranks: nodeRanks, spin: spinPays(nodes.ranksOnHost(env.rank)) },
    });
    store = near;
    let far: NetworkTensorStore | undefined;
    if (nodes.count > 1) {
      far = await networkStore(client, env, job, nodes, timeoutMs).catch((error: unknown) => {
        near.close();
        throw error;
      });
      store = new NodeRoutedStore(near, far, nodes.nodeOf, env.rank);
    }
    // The job directory goes with the job: hang reports must outlive it.
    const monitor = installProcessMonitor(
      env.rank,
      env.worldSize,
      node.dir,
      job.debug,
      job.names,
      join(tmpdir(), 'tensorcomm-hang-reports'),
    );
    const { board } = monitor;
    // Ranks of other nodes have no row in this node's directory: rows travel with the network store.
    if (far && board instanceof FileStatusBoard) {
      const network = far;
      board.share = (row) => network.shareStatus(row);
      network.onPeerStatus = (rank, row) => board.accept(rank, row);
    }
    await client.barrier('tensorcomm/start', env.worldSize, { timeoutMs });
    const trace = monitor.options.trace;
    return await buildContext(env, job, store, client, server, node, timeoutMs, watch, trace);
  } catch (error) {
    watch?.stop();
    store?.close();
    client?.close();
    await server?.close();
    if (node?.owned) removeJobDirectory(node.dir);
    throw error;
  }
}

function buildContext(
  env: ProcessEnv,
  job: ProcessJobInfo,
  store: TensorStore,
  client: RendezvousClient,
  server: RendezvousServer | undefined,
  node: NodeDirectory,
  timeoutMs: number,
  watch: PeerWatch | undefined,
  /** Where the job's trace goes, when it is traced (DebugOptions.trace). */
  trace: string | undefined,
): Promise<RankContext> {
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
    predict: job.predict,
  };
  // A long kernel (fill_ over gigabytes) holds the event loop that would notice the abort: it asks between chunks.
  registerInterruptCheck(() => {
    const aborted = readJobAbort(node.dir);
    if (aborted) throw aborted;
  });
  return buildRankContext(identity, store, jobOptions, async () => {
    registerInterruptCheck(undefined);
    // A peer of this node already gone will never reach the end: the job is over, nothing to wait for.
    const gone = watch?.gone();
    // From here on a peer that exits has ended its part, not failed it.
    watch?.stop();
    // Without a launcher the ranks own the job: a directory goes only once nobody uses it.
    try {
      if (!env.launched && gone === undefined) {
        // The job's one trace: rank 0 writes it from every rank's part once all reached the end.
        const handed = trace !== undefined && env.rank > 0 && (await handTracePart(client, trace, env.rank));
        await client.barrier('tensorcomm/end', env.worldSize, { timeoutMs });
        if (trace !== undefined && env.rank === 0) await writeJobTrace(client, trace, env.worldSize);
        if (handed) dropHandedPart(trace, env.rank);
      }
    } finally {
      // Also when the end never came (a peer of another node died): the node's files must not outlive it.
      if (node.owned) removeJobDirectory(node.dir);
      client.close();
      await server?.close();
    }
  });
}

let context: Promise<RankContext> | undefined;

/**
 * This process's rank context (torch's init_process_group): the same
 * RankContext as thread ranks get. Built once; later calls return it.
 */
export function initProcess(options: InitProcessOptions = {}): Promise<RankContext> {
  context ??= connect(options).then((ctx) => {
    // A script that never closes its context still releases it when it runs out of work.
    process.once('beforeExit', () => void ctx.close());
    return ctx;
  });
  return context;
}
