/**
 * broadcast across nodes in two levels, as NCCL's and Open MPI's
 * hierarchical broadcasts do: the root sends the tensor over the network
 * once to one rank of every other node (its lowest group rank), and through
 * its node's shared memory to its own node's ranks; each of those ranks of
 * the other nodes then hands it to the rest of its node through theirs. The
 * network carries the tensor L-1 times for L nodes, where a flat broadcast
 * sends it once to every rank off the root's node. What a rank receives
 * lands in its tensor where the store can write it there.
 */
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import { delegateOf } from './node-layout.ts';

export async function broadcastAcrossNodes(
  x: Exchange,
  tensor: Tensor,
  src: number,
  nodes: readonly number[][],
): Promise<void> {
  const node = nodes.find((ranks) => ranks.includes(x.rank))!;
  const receiver = delegateOf(node, src);
  const members = node.filter((p) => p !== receiver);
  if (x.rank === src) {
    const others = nodes.filter((ranks) => ranks !== node).map((ranks) => delegateOf(ranks, src));
    await x.publish(0, tensor, [...others, ...members]);
    await x.consumed(0);
    return;
  }
  // The root's node's ranks take it from the root; another node's from the rank that took it for their node.
  const [phase, from] = x.rank === receiver || receiver === src ? [0, src] : [1, receiver];
  x.landIn(phase, from, tensor);
  landOrCopy(tensor, await x.get(phase, from));
  await x.finish(phase, from);
  if (x.rank !== receiver || members.length === 0) return;
  await x.publish(1, tensor, members);
  await x.consumed(1);
}
