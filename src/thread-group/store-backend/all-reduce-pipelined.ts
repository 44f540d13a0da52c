/**
 * allReduce of a large tensor among ranks whose store copies values: the
 * processes of a node, or ranks that each sit on a node of their own (the
 * node leaders of a job, or one rank per node), where every byte crosses the
 * network. Reduce-scatter then all-gather, as in allReduce's large path, but
 * in chunks that flow one after the other, so sending, receiving and
 * reducing overlap. Every rank owns slice r of the tensor and
 * cuts every slice into chunks of at most `chunkBytes`:
 *
 * 1. it publishes, for each peer p, chunk after chunk of slice p (views of
 *    its own tensor: the network store writes them from there);
 * 2. as each chunk of its own slice has come from every peer, it reduces it
 *    (inputs in group-rank order, so its bits are the same whoever computes
 *    them) in place and publishes it for every peer at once, while later
 *    chunks are still arriving;
 * 3. after reducing chunk c, it copies each peer's reduced chunk c-1 into
 *    place (where it did not land there off the wire), once that peer has
 *    read what this rank sent it from the same place.
 *
 * Steps 1 and 2 are the pipelined reduce-scatter (reduce-scatter-pipelined.ts).
 * Every rank sends and receives 2(n-1)/n of the tensor, the bandwidth
 * optimum, and the wire is busy from the first chunk to the last.
 */
import { itemSize } from '../../tensor/dtype.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { type Exchange, landOrCopy } from './exchange.ts';
import {
  chunkRanges,
  onwardPhase,
  pipelineOptions,
  reduceScatterChunks,
  scatterPhase,
} from './reduce-scatter-pipelined.ts';
import { elements, sliceRange } from './slices.ts';

/** The element ranges [start, end) of slice `p`'s chunks. */
export function chunksOf(tensor: Tensor, n: number, p: number, chunkBytes: number): [number, number][] {
  const [start, end] = sliceRange(tensor.numel, n, p);
  return chunkRanges(start, end - start, itemSize(tensor.dtype), chunkBytes);
}

export async function allReducePipelined(
  x: Exchange,
  tensor: Tensor,
  op: ReduceOp,
  chunkBytes = pipelineOptions.chunkBytes,
): Promise<void> {
  // Data values go to one peer each, so the call's signatures are compared in an exchange of their own.
  await x.compareCalls();
  const n = x.size;
  const peers = x.peers();
  const chunks = Array.from({ length: n }, (_, p) => chunksOf(tensor, n, p, chunkBytes));
  const view = ([start, end]: [number, number]) => elements(tensor, start, end);
  const slices = Array.from({ length: n }, (_, p) => elements(tensor, ...sliceRange(tensor.numel, n, p)));
  // Each peer's reduced chunk may land where it goes: the peer sends it only after it read, from that
  // very place, what this rank sends it below.
  for (const p of peers)
    for (let c = 0; c < chunks[p].length; c++) x.landIn(onwardPhase(c), p, view(chunks[p][c]));
  /** Every peer's reduced chunk c, copied into place where it did not land there. */
  const gather = async (c: number) => {
    for (const p of peers) {
      if (c >= chunks[p].length) continue;
      const reduced = await x.get(onwardPhase(c), p);
      // The peer finished reading what we sent it from this very place before it sent the result.
      await x.consumed(scatterPhase(c), p);
      landOrCopy(view(chunks[p][c]), reduced);
      await x.finish(onwardPhase(c), p);
    }
  };
  // One chain of waits, each for what a peer sends without waiting for this rank's later steps: a second
  // chain (gathering beside reducing) stalled both, each spinning in one for what the other would send.
  // Chunk c-1 is gathered after chunk c is reduced, so the peers have had that time to send it.
  // Peers read only their own slices of this tensor: ours can hold the result.
  await reduceScatterChunks(
    x,
    { parts: slices, result: slices[x.rank] },
    op,
    chunkBytes,
    async (c, chunk) => {
      await x.publish(onwardPhase(c), chunk, peers);
      if (c > 0) await gather(c - 1);
    },
  );
  const most = Math.max(...chunks.map((c) => c.length));
  for (let c = Math.max(0, chunks[x.rank].length - 1); c < most; c++) await gather(c);
  for (let c = 0; c < chunks[x.rank].length; c++) await x.consumed(onwardPhase(c));
}
