/**
 * allReduce of a large tensor among ranks that each sit on a node of their
 * own (the node leaders of a job, or one rank per node), where every byte
 * crosses the network: reduce-scatter then all-gather, as in allReduce's
 * large path, but in chunks that flow one after the other, so sending,
 * receiving and reducing overlap. Every rank owns slice r of the tensor and
 * cuts every slice into chunks of at most `chunkBytes`:
 *
 * 1. it publishes, for each peer p, chunk after chunk of slice p (views of
 *    its own tensor: the network store writes them from there);
 * 2. as each chunk of its own slice has come from every peer, it reduces it
 *    (inputs in group-rank order, so its bits are the same whoever computes
 *    them) in place and publishes it for every peer at once, while later
 *    chunks are still arriving;
 * 3. meanwhile it copies each peer's reduced chunks into place as they come,
 *    once that peer has read what this rank sent it from the same place.
 *
 * Every rank sends and receives 2(n-1)/n of the tensor, the bandwidth
 * optimum, and the wire is busy from the first chunk to the last.
 */
import { itemSize } from '../../tensor/dtype.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import { elements, reduceInto, sliceRange } from './slices.ts';

/**
 * The largest chunk a slice is cut into: large enough that per-value costs
 * (a handshake and a wake-up each, whatever the size) vanish, small enough
 * to overlap. Tests set it small to cut tensors into many chunks.
 */
export const pipelineOptions = { chunkBytes: 8 << 20 };

/** The element ranges [start, end) of slice `p`'s chunks. */
export function chunksOf(tensor: Tensor, n: number, p: number, chunkBytes: number): [number, number][] {
  const [start, end] = sliceRange(tensor.numel, n, p);
  const per = Math.max(1, Math.floor(chunkBytes / itemSize(tensor.dtype)));
  const chunks: [number, number][] = [];
  for (let at = start; at < end; at += per) chunks.push([at, Math.min(end, at + per)]);
  return chunks;
}

/** Phase keys: chunk c of the reduce-scatter, and of the all-gather. */
const scatterPhase = (c: number) => 2 * c;
const gatherPhase = (c: number) => 2 * c + 1;

export async function allReducePipelined(
  x: Exchange,
  tensor: Tensor,
  op: ReduceOp,
  chunkBytes = pipelineOptions.chunkBytes,
): Promise<void> {
  // Data values go to one peer each, so the call's signatures are compared in an exchange of their own.
  await x.compareCalls();
  const n = x.size;
  const me = x.rank;
  const peers = x.peers();
  const chunks = Array.from({ length: n }, (_, p) => chunksOf(tensor, n, p, chunkBytes));
  const view = ([start, end]: [number, number]) => elements(tensor, start, end);
  const most = Math.max(...chunks.map((c) => c.length));
  // Each peer's reduced chunk may land where it goes: the peer sends it only after it read, from that
  // very place, what this rank sends it below.
  for (const p of peers)
    for (let c = 0; c < chunks[p].length; c++) x.landIn(gatherPhase(c), p, view(chunks[p][c]));
  for (let c = 0; c < most; c++) {
    for (const p of peers)
      if (c < chunks[p].length) await x.publishOperand(scatterPhase(c), view(chunks[p][c]), [p], p);
  }
  const reduceOwn = async () => {
    for (let c = 0; c < chunks[me].length; c++) {
      const mine = view(chunks[me][c]);
      const inputs: Tensor[] = [];
      for (let p = 0; p < n; p++) inputs.push(p === me ? mine : await x.get(scatterPhase(c), p, me));
      // Peers read only their own slices of this tensor: ours can hold the result.
      reduceInto(op, mine, inputs);
      for (const p of peers) await x.finish(scatterPhase(c), p, me);
      await x.publish(gatherPhase(c), mine, peers);
    }
  };
  const gatherFrom = async (p: number) => {
    for (let c = 0; c < chunks[p].length; c++) {
      const reduced = await x.get(gatherPhase(c), p);
      // The peer finished reading what we sent it from this very place before it sent the result.
      await x.consumed(scatterPhase(c), p);
      const into = view(chunks[p][c]);
      landOrCopy(into, reduced);
      await x.finish(gatherPhase(c), p);
    }
  };
  await Promise.all([reduceOwn(), ...peers.map(gatherFrom)]);
  for (let c = 0; c < chunks[me].length; c++) await x.consumed(gatherPhase(c));
}
