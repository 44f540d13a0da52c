/**
 * allReduce across nodes, in two levels as gloo's and NCCL's hierarchical
 * schemes do: the ranks of each node reduce into their node's leader (its
 * lowest group rank) through the node's shared memory, the leaders allReduce
 * among themselves over the network (allReduce's own algorithm, so slices of
 * a large tensor, pipelined in chunks), and each leader hands the result to its node. Only the
 * leaders' traffic crosses the network: per node 2(L-1)/L of the tensor for
 * L nodes, instead of that per rank. Every rank ends with the leaders'
 * result, so with identical bits.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { allReduce, ONE_EXCHANGE_MAX_BYTES } from './all-reduce.ts';
import { allReducePipelined } from './all-reduce-pipelined.ts';
import { type Exchange, landOrCopy, runExchange } from './exchange.ts';
import { elements, reduceInto, sliceRange } from './slices.ts';

/**
 * allReduce among ranks of distinct nodes: a large tensor in pipelined chunks
 * (all-reduce-pipelined.ts), a small one as any allReduce.
 */
export function allReduceAmongNodes(x: Exchange, tensor: Tensor, op: ReduceOp): Promise<void> {
  if (x.size > 1 && tensor.nbytes > ONE_EXCHANGE_MAX_BYTES) return allReducePipelined(x, tensor, op);
  return allReduce(x, tensor, op);
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
    // The leader reads our tensor before it sends the result, which may then land in it.
    x.landIn(1, leader, tensor);
    await x.publishOperand(0, tensor, [leader]);
    const result = await x.get(1, leader);
    await x.consumed(0);
    landOrCopy(tensor, result);
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
  await runExchange(among, (l) => allReduceAmongNodes(l, tensor, op));
  if (members.length === 0) return;
  await x.publish(1, tensor, members);
  await x.consumed(1);
}

/**
 * allReduce across nodes that hold m ranks each, in rails as NCCL's
 * hierarchical schemes run them: the ranks of each node reduce-scatter the
 * tensor among themselves (local rank j ends with slice j of m, reduced over
 * its node, through the node's shared memory); local rank j of every node
 * then allReduces slice j with the others' (a rail, over the network,
 * pipelined), all m rails at once; and the ranks of each node all-gather
 * their slices. Every rank works on 1/m of the data, none waits for a
 * leader, and across the nodes each rail moves 2(L-1)/L of its slice for L
 * nodes: the node's traffic is the leaders' scheme's, spread over m ranks.
 * Each slice's result is computed once and copied, so every rank ends with
 * identical bits.
 */
export async function allReduceByRails(
  x: Exchange,
  tensor: Tensor,
  op: ReduceOp,
  nodes: readonly number[][],
): Promise<void> {
  await x.compareCalls();
  const node = nodes.find((ranks) => ranks.includes(x.rank))!;
  const m = node.length;
  const j = node.indexOf(x.rank);
  const local = node.filter((p) => p !== x.rank);
  const range = (i: number) => sliceRange(tensor.numel, m, i);
  const slice = (i: number) => elements(tensor, ...range(i));
  // Each local peer's slice may land where it goes: the peer sends it only after it read, from that
  // very place, what this rank sends it now.
  for (let i = 0; i < m; i++) if (i !== j) x.landIn(1, node[i], slice(i));
  for (let i = 0; i < m; i++) if (i !== j) await x.publishOperand(0, slice(i), [node[i]], node[i]);
  const mine = slice(j);
  const inputs: Tensor[] = [];
  for (const p of node) inputs.push(p === x.rank ? mine : await x.get(0, p, x.rank));
  // Local peers read only their own slices of our tensor: ours can hold the node's result.
  reduceInto(op, mine, inputs);
  for (const p of local) await x.finish(0, p, x.rank);
  const rail = nodes.map((ranks) => ranks[j]);
  await runExchange(x.among(rail, `rail${j}`), (r) => allReduceAmongNodes(r, mine, op));
  // The local peers read what we sent them from the places their slices now go.
  for (const p of local) await x.consumed(0, p);
  await x.publish(1, mine, local);
  for (let i = 0; i < m; i++) {
    if (i === j) continue;
    const reduced = await x.get(1, node[i]);
    landOrCopy(slice(i), reduced);
    await x.finish(1, node[i]);
  }
  await x.consumed(1);
}
