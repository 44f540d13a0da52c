/**
 * Which way each bucket travels when the group spans nodes. A sender sends
 * straight to the receivers on its own node (shared memory) and to one
 * receiver per other node, that node's relay (its lowest receiving rank),
 * which hands every bucket on to the node's other receivers through the
 * node's shared memory. So each byte crosses the network once per receiving
 * node instead of once per receiver. On one node every route is direct.
 */
import type { ThreadGroup } from '../thread-group/thread-group.ts';
export interface Routes {
  /** The receivers sender `s` sends to itself: those on its node and the other nodes' relays. */
  targetsOf(s: number): readonly number[];
  /** Where receiver `r` takes sender `s`'s buckets from: `s` itself, or the relay of `r`'s node. */
  sourceOf(s: number, r: number): number;
  /** The receivers `r` hands sender `s`'s buckets on to: none unless `r` relays them. */
  followersOf(r: number, s: number): readonly number[];
}

export function planRoutes(
  senders: readonly number[],
  receivers: readonly number[],
  nodeOf: (groupRank: number) => number,
): Routes {
  const node = new Map([...senders, ...receivers].map((r) => [r, nodeOf(r)]));
  const relayOf = new Map<number, number>();
  for (const r of [...receivers].sort((a, b) => a - b)) {
    if (!relayOf.has(node.get(r)!)) relayOf.set(node.get(r)!, r);
  }
  const sourceOf = (s: number, r: number): number => {
    const relay = relayOf.get(node.get(r)!)!;
    return node.get(s) === node.get(r) || relay === r ? s : relay;
  };
  const targets = new Map(senders.map((s) => [s, receivers.filter((r) => sourceOf(s, r) === s)]));
  const followersOf = (r: number, s: number): readonly number[] =>
    relayOf.get(node.get(r)!) === r ? receivers.filter((f) => f !== r && sourceOf(s, f) === r) : [];
  return { targetsOf: (s) => targets.get(s)!, sourceOf, followersOf };
}

/** Whether group rank `r` is on another node than this rank. */
export function onOtherNode(group: ThreadGroup, r: number): boolean {
  return group.nodeOf(r) !== group.nodeOf(group.rank);
}
