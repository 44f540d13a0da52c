/**
 * group.nodeOf / nodes() and ctx.networkStats() on thread ranks: all on node
 * 0 with no network, and, over a store that says which "node" each rank is on
 * (test/fixtures/node-store.ts, as the two-level collectives' tests use), the
 * job's node indexes in order of each node's lowest rank, and the memory
 * its members share (nodeMemory). Across real nodes, test/many-nodes.test.ts
 * checks nodeOf and nodes(), and test/many-nodes-weight-sync.test.ts node
 * memory (its relay hands buckets on in it).
 */
import { describe, expect, it } from 'vitest';
import { Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { membersByNode, nodeIndexes } from '../src/thread-group/group-nodes.ts';
import { groupOnNodes } from './fixtures/node-store.ts';

rankTest('thread ranks are all on node 0 and used no network', { worldSize: 3 }, async (ctx) => {
  expect([0, 1, 2].map((r) => ctx.world.nodeOf(r))).toEqual([0, 0, 0]);
  expect(ctx.world.nodes()).toEqual([[0, 1, 2]]);
  const pair = await ctx.newGroup([1, 2]);
  expect([pair.nodeOf(0), pair.nodeOf(1)]).toEqual([0, 0]);
  expect(pair.nodes()).toEqual([[0, 1]]);
  for (const wrong of [3, -1, 0.5]) {
    expect(() => ctx.world.nodeOf(wrong)).toThrow(
      new RangeError(`nodeOf: rank ${wrong} is not a rank of group "world" (size 3)`),
    );
  }
  // Shared memory is not the network: a collective leaves the counts at zero.
  await ctx.world.allReduce(Tensor.ones([4]));
  expect(ctx.networkStats()).toEqual({ sentBytes: 0, receivedBytes: 0, peers: {} });
  pair.destroy();
});

rankTest(
  'over a store spanning nodes, the job node indexes by lowest rank',
  { worldSize: 5 },
  async (ctx) => {
    // Rank 0 is on "b": indexes follow the nodes' lowest ranks, not their ids.
    const { group } = groupOnNodes(ctx, ['b', 'a', 'b', 'c', 'a'], { bytes: 0 });
    expect([0, 1, 2, 3, 4].map((r) => group.nodeOf(r))).toEqual([0, 1, 0, 2, 1]);
    expect(group.nodes()).toEqual([[0, 2], [1, 4], [3]]);
    expect(() => group.nodeOf(5)).toThrow(/nodeOf: rank 5 is not a rank of group "nodes" \(size 5\)/);
    group.destroy();
  },
);

rankTest(
  'nodeMemory: what a member makes, the members of its node map; elsewhere, none',
  { worldSize: 4 },
  async (ctx) => {
    // Thread ranks share no node memory: their tensors are common memory already.
    expect(ctx.world.nodeMemory('k', 0, 64)).toBeUndefined();
    const { group } = groupOnNodes(ctx, ['a', 'a', 'b', 'b'], { bytes: 0 }, { nodeMemory: true });
    // Ranks 0 and 2 make theirs and write their rank; each rank reads its node's owner's.
    const owner = ctx.rank < 2 ? 0 : 2;
    if (ctx.rank === owner) group.nodeMemory('k', owner, 64)!.fill(owner + 1);
    await ctx.world.barrier();
    expect(Array.from(group.nodeMemory('k', owner, 64)!.subarray(0, 2))).toEqual([owner + 1, owner + 1]);
    expect(group.nodeMemory('k', 2 - owner, 64), "the other node's owner").toBeUndefined();
    expect(() => group.nodeMemory('k', 4, 64)).toThrow(/nodeMemory: owner 4 is not a rank of group "nodes"/);
    expect(() => group.nodeMemory('k', 0, 0)).toThrow(
      new RangeError('nodeMemory: bytes must be a positive integer, got 0'),
    );
    await ctx.world.barrier();
    group.destroy();
    expect(() => group.nodeMemory('k', owner, 64)).toThrow(/nodeMemory: the group was destroyed/);
  },
);

describe('group-nodes helpers', () => {
  it('numbers nodes by first appearance and lists members in node order', () => {
    expect(nodeIndexes(['x', 'y', 'x', 'z'])).toEqual([0, 1, 0, 2]);
    // A subgroup of nodes 2 and 1 lists node 1's members first, whatever their group ranks.
    expect(membersByNode([2, 1, 2, 1])).toEqual([
      [1, 3],
      [0, 2],
    ]);
  });
});
