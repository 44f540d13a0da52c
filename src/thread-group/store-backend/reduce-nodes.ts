/**
 * reduce (to one root) across nodes in two levels: the ranks of each node
 * send their tensors through its shared memory to one rank of it (the root
 * on the root's node, else the node's lowest rank), which reduces them and
 * sends the node's partial result over the network to the root; the root
 * reduces its own node's tensors and the partials. Each node sends the root
 * one tensor, where a flat reduce sends it one per rank. Not for `avg` (an
 * average of averages is wrong when nodes hold different numbers of ranks).
 * Inputs are reduced in a fixed order (nodes in order, ranks within them),
 * so the result does not depend on timing. Non-roots' tensors are left as
 * they were.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { Exchange } from './exchange.ts';
import { delegateOf } from './node-layout.ts';
import { reduceInto } from './slices.ts';

export async function reduceAcrossNodes(
  x: Exchange,
  tensor: Tensor,
  dst: number,
  op: ReduceOp,
  nodes: readonly number[][],
): Promise<void> {
  const node = nodes.find((ranks) => ranks.includes(x.rank))!;
  const reducer = delegateOf(node, dst);
  if (x.rank !== reducer) {
    await x.publishOperand(0, tensor, [reducer]);
    await x.consumed(0);
    return;
  }
  const inputs: Tensor[] = [];
  for (const p of node) inputs.push(p === x.rank ? tensor : await x.get(0, p));
  const members = node.filter((p) => p !== x.rank);
  if (x.rank !== dst) {
    // Our own tensor stays as it was: the node's partial result goes in a tensor of its own.
    const partial = Tensor.empty(tensor.shape, tensor.dtype);
    reduceInto(op, partial, inputs);
    for (const p of members) await x.finish(0, p);
    await x.publishOperand(1, partial, [dst]);
    await x.consumed(1);
    return;
  }
  for (const ranks of nodes) if (ranks !== node) inputs.push(await x.get(1, delegateOf(ranks, dst)));
  reduceInto(op, tensor, inputs);
  for (const p of members) await x.finish(0, p);
  for (const ranks of nodes) if (ranks !== node) await x.finish(1, delegateOf(ranks, dst));
}
