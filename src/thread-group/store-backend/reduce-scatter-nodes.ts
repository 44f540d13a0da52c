/**
 * reduceScatter across nodes in two levels: for each slice owned by a rank
 * of another node, one rank of this node (its reducer of that slice, the
 * rank at the owner's position within its own node, wrapped around this
 * node's ranks) reduces this node's contributions through its shared memory
 * and sends the owner the node's partial result over the network; each
 * owner reduces its own node's contributions and the other nodes' partials.
 * Each node sends a slice's owner one partial, where a flat reduceScatter
 * sends one contribution per rank. The reducing work is spread over each
 * node's ranks. Not for `avg` (an average of averages is wrong on nodes of
 * unequal size). Inputs are reduced in a fixed order (this node's ranks in
 * order, then the other nodes' partials in node order).
 *
 * The caller compares the ranks' calls first: not every pair of ranks
 * exchanges a value here.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { Exchange } from './exchange.ts';
import { reduceInto } from './slices.ts';

/** Phases: a contribution to its owner on the same node, a node's partial to the owner, a contribution to slice q's reducer. */
const OWN_NODE = 0;
const PARTIAL = 1;
const toReducer = (q: number) => 2 + q;

export async function reduceScatterAcrossNodes(
  x: Exchange,
  output: Tensor,
  inputs: readonly Tensor[],
  op: ReduceOp,
  nodes: readonly number[][],
): Promise<void> {
  const nodeOfRank = (p: number) => nodes.find((ranks) => ranks.includes(p))!;
  const node = nodeOfRank(x.rank);
  /** The rank of `ranks` (one node's) that reduces that node's contributions to slice `q`. */
  const reducerOf = (ranks: readonly number[], q: number) => {
    const owners = nodeOfRank(q);
    return ranks[owners.indexOf(q) % ranks.length];
  };
  const neighbours = node.filter((p) => p !== x.rank);
  const remote = nodes.filter((ranks) => ranks !== node).flat();
  const mine = remote.filter((q) => reducerOf(node, q) === x.rank);
  for (const q of neighbours) await x.publishOperand(OWN_NODE, inputs[q], [q], q);
  for (const q of remote) {
    const reducer = reducerOf(node, q);
    if (reducer !== x.rank) await x.publishOperand(toReducer(q), inputs[q], [reducer], reducer);
  }
  for (const q of mine) {
    const parts: Tensor[] = [];
    for (const p of node) parts.push(p === x.rank ? inputs[q] : await x.get(toReducer(q), p, x.rank));
    const partial = Tensor.empty(output.shape, output.dtype);
    reduceInto(op, partial, parts);
    for (const p of neighbours) await x.finish(toReducer(q), p, x.rank);
    await x.publishOperand(PARTIAL, partial, [q], q);
  }
  const parts: Tensor[] = [];
  for (const p of node) {
    if (p === x.rank) {
      parts.push(inputs[p]);
      continue;
    }
    const part = await x.get(OWN_NODE, p, x.rank);
    x.expectLike(part, output, p);
    parts.push(part);
  }
  const reducers = nodes.filter((ranks) => ranks !== node).map((ranks) => reducerOf(ranks, x.rank));
  for (const r of reducers) {
    const part = await x.get(PARTIAL, r, x.rank);
    x.expectLike(part, output, r);
    parts.push(part);
  }
  reduceInto(op, output, parts);
  for (const p of neighbours) await x.finish(OWN_NODE, p, x.rank);
  for (const r of reducers) await x.finish(PARTIAL, r, x.rank);
  for (const q of neighbours) await x.consumed(OWN_NODE, q);
  for (const q of remote) {
    const reducer = reducerOf(node, q);
    await (reducer === x.rank ? x.consumed(PARTIAL, q) : x.consumed(toReducer(q), reducer));
  }
}
