/** Where a group's ranks sit on a topology: the nodes it spans and how many of its ranks each holds. */
import type { Topology } from './topology.ts';

export interface GroupShape {
  /** Ranks in the group. */
  size: number;
  /** Nodes the group spans. */
  nodes: number;
  /** The group's ranks on each node it spans. */
  perNode: readonly number[];
  /** The most ranks the group has on one node (NCCL's local GPUs on the busiest node). */
  localMax: number;
  /** The group's ranks on the node of its first rank (the root of gather and scatter, the sender of send). */
  rootLocal: number;
}

/** The shape of the group of global ranks `ranks` (already checked to be on the topology). */
export function groupShape(topology: Topology, ranks: readonly number[]): GroupShape {
  const counts = new Map<number, number>();
  for (const rank of ranks) {
    const { node } = topology.placementOf(rank);
    counts.set(node, (counts.get(node) ?? 0) + 1);
  }
  const perNode = [...counts.values()];
  return {
    size: ranks.length,
    nodes: counts.size,
    perNode,
    localMax: Math.max(...perNode),
    rootLocal: counts.get(topology.placementOf(ranks[0]).node) ?? 0,
  };
}
