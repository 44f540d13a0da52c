/**
 * Ranks that another engine started (torchrun, mpirun, srun) may sit on
 * several machines, but a job's ranks reach each other only through one
 * machine's shared memory (FileTensorStore) until the network store exists.
 * Every rank checks that they all report the same node, before any store
 * is used, so a job spread over machines fails at once on every rank with
 * the nodes named, instead of waiting on files another machine cannot see.
 */
import type { ProcessEnv } from '../launch/process-env.ts';
import type { RendezvousClient } from '../rendezvous/client.ts';

const FIRST_NODE_KEY = 'tensorcomm/node';
const CONFLICT_KEY = 'tensorcomm/node-conflict';

export async function checkOneNode(
  client: RendezvousClient,
  env: ProcessEnv,
  timeoutMs: number,
): Promise<void> {
  // The first rank to get here names the node; every other rank compares.
  const first = new TextDecoder().decode(await client.compareSet(FIRST_NODE_KEY, '', env.nodeId));
  if (first !== env.nodeId) {
    await client.set(
      CONFLICT_KEY,
      `rank ${env.rank} runs on node "${env.nodeId}", another rank on node "${first}"`,
    );
  }
  await client.barrier(FIRST_NODE_KEY, env.worldSize, { timeoutMs });
  if (await client.check([CONFLICT_KEY])) {
    const conflict = new TextDecoder().decode(await client.get(CONFLICT_KEY));
    // Rank 0 serves the rendezvous: it may stop only once every rank has read the conflict.
    await client.barrier(CONFLICT_KEY, env.worldSize, { timeoutMs });
    throw new Error(
      `initProcess: the job's ranks are on more than one node (${conflict}; node ids come from ` +
        'TENSORCOMM_NODE_ID, else SLURM_NODEID, else the host name). Ranks on different nodes need the ' +
        'network store, which this version does not have yet: run every rank of the job on one machine',
    );
  }
}
