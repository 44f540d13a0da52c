/**
 * Which ranks share a node: every rank publishes its node id (the node rule:
 * the same launcher, else TENSORCOMM_NODE_ID, SLURM_NODEID or the host name)
 * through the rendezvous and reads everyone's, so all ranks agree on the
 * nodes, their order (by lowest rank) and each node's leader (its lowest rank).
 * It publishes its host name too: several "nodes" may share one machine (node
 * ids that tests and benches give ranks of one host), and its cores.
 */
import { hostname } from 'node:os';
import type { RendezvousClient } from '../rendezvous/client.ts';
import { CommTimeoutError } from '../runtime/errors.ts';

export class NodeMap {
  /** Node ids by global rank. */
  readonly nodeOf: readonly string[];
  /** Process ids by global rank: a rank's own node can tell when one of them is gone. */
  readonly pids: readonly number[];
  /** Host names by global rank. */
  readonly hosts: readonly string[];
  /** Node ids in the order of their lowest rank. */
  readonly nodes: readonly string[];

  constructor(nodeOf: readonly string[], pids: readonly number[], hosts: readonly string[]) {
    this.nodeOf = nodeOf;
    this.pids = pids;
    this.hosts = hosts;
    this.nodes = [...new Set(nodeOf)];
  }

  get count(): number {
    return this.nodes.length;
  }

  sameNode(a: number, b: number): boolean {
    return this.nodeOf[a] === this.nodeOf[b];
  }

  /** The global ranks on `rank`'s node, ascending. */
  ranksWith(rank: number): number[] {
    return this.nodeOf.flatMap((node, r) => (node === this.nodeOf[rank] ? [r] : []));
  }

  /** The global ranks on `rank`'s machine (its host name), whatever their nodes, ascending. */
  ranksOnHost(rank: number): number[] {
    return this.hosts.flatMap((host, r) => (host === this.hosts[rank] ? [r] : []));
  }

  /** 0 for the node of rank 0, then in order of each node's lowest rank. */
  indexOf(rank: number): number {
    return this.nodes.indexOf(this.nodeOf[rank]);
  }
}

const nodeKey = (rank: number) => `tensorcomm/node-of/${rank}`;

interface RankPlace {
  node: string;
  pid: number;
  host: string;
}

/** Publishes this rank's node id (and pid) and waits for every rank's; a rank that never comes is named in the timeout. */
export async function exchangeNodeIds(
  client: RendezvousClient,
  rank: number,
  worldSize: number,
  nodeId: string,
  timeoutMs: number,
): Promise<NodeMap> {
  const mine: RankPlace = { node: nodeId, pid: process.pid, host: hostname() };
  await client.set(nodeKey(rank), JSON.stringify(mine));
  const deadline = performance.now() + timeoutMs;
  const nodeOf: string[] = [];
  const pids: number[] = [];
  const hosts: string[] = [];
  for (let r = 0; r < worldSize; r++) {
    try {
      const value = await client.get(nodeKey(r), {
        timeoutMs: Math.max(1, Math.ceil(deadline - performance.now())),
      });
      const place = JSON.parse(new TextDecoder().decode(value)) as RankPlace;
      nodeOf.push(place.node);
      pids.push(place.pid);
      hosts.push(place.host);
    } catch (error) {
      if (!(error instanceof CommTimeoutError)) throw error;
      const missing: number[] = [];
      for (let m = r; m < worldSize; m++) if (!(await client.check([nodeKey(m)]))) missing.push(m);
      throw new CommTimeoutError(
        `initProcess: rank ${rank} waited ${timeoutMs} ms for every rank to join, but ` +
          `${missing.length === 1 ? 'rank' : 'ranks'} ${missing.join(', ')} never reached the rendezvous`,
      );
    }
  }
  return new NodeMap(nodeOf, pids, hosts);
}
