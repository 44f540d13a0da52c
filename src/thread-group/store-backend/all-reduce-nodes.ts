/**
 * allReduce across nodes, in two levels as gloo's and NCCL's hierarchical
 * schemes do: the ranks of each node reduce into their node's leader (its
 * lowest group rank) through the node's shared memory, the leaders allReduce
 * among themselves over the network (allReduce's own algorithm, so slices of
 * a large tensor), and each leader hands the result to its node. Only the
 * leaders' traffic crosses the network: per node 2(L-1)/L of the tensor for
 * L nodes, instead of that per rank. Every rank ends with the leaders'
 * result, so with identical bits.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { allReduce } from './all-reduce.ts';
import { type Exchange, runExchange } from './exchange.ts';
import { copyElements, reduceInto } from './slices.ts';

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

/** Whether the two levels help: the group spans nodes and some node holds several of its ranks. */
export function worthTwoLevels(nodes: number[][] | undefined): nodes is number[][] {
  return nodes !== undefined && nodes.length > 1 && nodes.some((ranks) => ranks.length > 1);
}

export async function allReduceAcrossNodes(
  x: Exchange,
  tensor: Tensor,
  op: ReduceOp,
  nodes: readonly number[][],
): Promise<void> {
  // Every rank reads every other's signature first, as every allReduce does.
  await x.compareCalls();
  const node = nodes.find((ranks) => ranks.includes(x.rank))!;
  const [leader, ...members] = node;
  if (x.rank !== leader) {
    await x.publish(0, tensor, [leader]);
    const result = await x.get(1, leader);
    // The leader read our tensor before it sent the result: it is ours again.
    await x.consumed(0);
    copyElements(tensor, 0, result);
    await x.finish(1, leader);
    return;
  }
  // Nobody reads the leader's tensor in this step: it can hold the node's sum.
  const inputs = [tensor];
  for (const p of members) inputs.push(await x.get(0, p));
  reduceInto(op, tensor, inputs);
  for (const p of members) await x.finish(0, p);
  const leaders = nodes.map((ranks) => ranks[0]);
  const among = x.among(leaders, 'leaders');
  await runExchange(among, (l) => allReduce(l, tensor, op));
  if (members.length === 0) return;
  await x.publish(1, tensor, members);
  await x.consumed(1);
}
