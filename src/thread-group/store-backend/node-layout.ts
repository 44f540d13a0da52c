/**
 * Which ranks of an exchange share a node, for the collectives whose
 * algorithm depends on it (those that keep bytes off the network where a
 * node's shared memory can carry them).
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { ONE_EXCHANGE_MAX_BYTES } from './all-reduce.ts';
import type { Exchange } from './exchange.ts';

/** Group ranks by node, nodes in the order of their lowest group rank; undefined unless the store spans nodes. */
export function nodesOf(x: Exchange): number[][] | undefined {
  const byNode = new Map<string, number[]>();
  for (let p = 0; p < x.size; p++) {
    const node = x.nodeOf(p);
    if (node === undefined) return undefined;
    const ranks = byNode.get(node);
    if (ranks) ranks.push(p);
    else byNode.set(node, [p]);
  }
  return [...byNode.values()];
}

/** Whether the ranks sit on more than one node, so some of their values cross the network. */
export function spansNodes(nodes: number[][] | undefined): nodes is number[][] {
  return nodes !== undefined && nodes.length > 1;
}

/** Whether every rank of the exchange sits on a node of its own, so every value crosses the network. */
export function oneRankPerNode(nodes: number[][] | undefined): boolean {
  return spansNodes(nodes) && nodes.every((ranks) => ranks.length === 1);
}

/** Whether the two levels help: the group spans nodes and some node holds several of its ranks. */
export function worthTwoLevels(nodes: number[][] | undefined): nodes is number[][] {
  return spansNodes(nodes) && nodes.some((ranks) => ranks.length > 1);
}

/**
 * The rank of one node's `ranks` that stands for the node in a rooted collective taken in two levels: the
 * root itself on the root's node, else the node's lowest rank.
 */
export function delegateOf(ranks: readonly number[], root: number): number {
  return ranks.includes(root) ? root : ranks[0];
}

/** Whether every node holds the same number (more than one) of the group's ranks: the rails apply. */
export function evenNodes(nodes: readonly number[][]): boolean {
  return nodes.length > 1 && nodes[0].length > 1 && nodes.every((ranks) => ranks.length === nodes[0].length);
}

/**
 * Whether a reduction into `result` (reduce, reduceScatter) with `op` takes two levels across `nodes`: a
 * large host tensor, where nodes hold several ranks, and not avg (an average of averages is wrong on nodes
 * of unequal size).
 */
export function reducesInTwoLevels(
  nodes: number[][] | undefined,
  result: Tensor,
  op: ReduceOp,
): nodes is number[][] {
  return (
    worthTwoLevels(nodes) && op !== 'avg' && result.device === 'cpu' && result.nbytes > ONE_EXCHANGE_MAX_BYTES
  );
}
