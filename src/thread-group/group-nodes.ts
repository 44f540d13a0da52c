/**
 * Which node each member of a group runs on (ThreadGroup.nodeOf, nodes()).
 * The rank's context works it out once from its store's node ids
 * (TensorStore.nodeOf: the node rule the launcher and initProcess apply) and
 * hands each group its members' indexes, so users and the layers above (weight
 * sync's per-node relay) need not know the store nor its ids, which are
 * strings of the launcher's making. Indexes are the job's, not a group's: node
 * i is the same node in every group (with `tensorcomm run`, its --node-rank).
 */

/**
 * Each global rank's node index, from the node ids by global rank: 0 for rank
 * 0's node, then in order of each node's lowest global rank.
 */
export function nodeIndexes(nodeIds: readonly string[]): number[] {
  const index = new Map<string, number>();
  return nodeIds.map((id) => {
    const known = index.get(id);
    if (known !== undefined) return known;
    index.set(id, index.size);
    return index.size - 1;
  });
}

/** The group ranks on each node the group spans, in node order, each node's ascending; `nodeOf`: by group rank. */
export function membersByNode(nodeOf: readonly number[]): number[][] {
  const byNode = new Map<number, number[]>();
  nodeOf.forEach((node, groupRank) => {
    const members = byNode.get(node);
    if (members) members.push(groupRank);
    else byNode.set(node, [groupRank]);
  });
  return [...byNode.entries()].sort(([a], [b]) => a - b).map(([, members]) => members);
}
