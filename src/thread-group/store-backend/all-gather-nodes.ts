/**
 * allGather across nodes in two levels: every rank sends its piece through
 * its node's shared memory to its node's other ranks, and over the network
 * once to each other node, to that node's lowest rank (its leader), which
 * hands it on to the rest of its node through theirs. Each piece crosses to
 * each other node once, where a flat allGather sends it to every rank off
 * its node. What a rank receives lands in its place in the output where the
 * store can write it there.
 */
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import { copyElements } from './slices.ts';

/** Phase in which a leader hands on the piece of group rank `p` (phase 0 carries every rank's own). */
const handOn = (p: number) => 1 + p;

/** Gathers every rank's `input` into `places[p]`, the place of rank p's piece in the output. */
export async function gatherAcrossNodes(
  x: Exchange,
  input: Tensor,
  places: readonly Tensor[],
  nodes: readonly number[][],
): Promise<void> {
  const node = nodes.find((ranks) => ranks.includes(x.rank))!;
  const leader = node[0];
  const neighbours = node.filter((p) => p !== x.rank);
  const others = nodes.filter((ranks) => ranks !== node);
  const remote = others.flat();
  copyElements(places[x.rank], 0, input);
  for (const p of neighbours) x.landIn(0, p, places[p]);
  for (const p of remote) {
    if (x.rank === leader) x.landIn(0, p, places[p]);
    else x.landIn(handOn(p), leader, places[p]);
  }
  await x.publish(0, input, [...neighbours, ...others.map((ranks) => ranks[0])]);
  for (const p of neighbours) {
    landOrCopy(places[p], await x.get(0, p));
    await x.finish(0, p);
  }
  if (x.rank === leader) {
    for (const p of remote) {
      landOrCopy(places[p], await x.get(0, p));
      await x.finish(0, p);
      if (neighbours.length > 0) await x.publish(handOn(p), places[p], neighbours);
    }
    if (neighbours.length > 0) for (const p of remote) await x.consumed(handOn(p));
  } else {
    for (const p of remote) {
      landOrCopy(places[p], await x.get(handOn(p), leader));
      await x.finish(handOn(p), leader);
    }
  }
  await x.consumed(0);
}
