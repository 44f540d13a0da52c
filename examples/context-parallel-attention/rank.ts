/**
 * One rank of ring attention: it keeps its block of queries and passes the
 * K/V blocks around the ring, sending the block it holds to the next rank and
 * receiving the previous rank's while it computes on the one it has.
 */
import { DeviceMesh, DTensor, distributeTensor, type RankContext, Shard, Tensor } from 'tensorcomm';
import { GPU_FLOPS_PER_US } from '../predicted-runs.ts';
import { OnlineSoftmax, qkv } from './attention.ts';

export interface AttentionArgs {
  seq: number;
  dim: number;
}

export interface RingResult {
  /** How many K/V blocks this rank attended to (causal ranks skip blocks from later positions). */
  blocks: number;
  /** The full attention output, gathered from every rank's rows. */
  output: number[];
}

export default async function main(
  ctx: RankContext,
  args: AttentionArgs,
): Promise<Record<'full' | 'causal', RingResult>> {
  const { seq, dim } = args;
  const mesh = new DeviceMesh(ctx.world, [ctx.worldSize]);
  const values = qkv(seq, dim);
  const shard = async (v: Float32Array) =>
    (await distributeTensor(Tensor.fromArray(v, [seq, dim]), mesh, [Shard(0)])).toLocal();
  const [q, k, v] = [await shard(values.q), await shard(values.k), await shard(values.v)];
  // A block's scores Q·Kᵀ and its weighted sum P·V: 2 × 2·rows²·dim operations.
  const rows = seq / ctx.worldSize;
  const attendBlock = () => ctx.predict?.compute((4 * rows * rows * dim) / GPU_FLOPS_PER_US);
  return {
    full: await ringAttention(mesh, q, k, v, false, attendBlock),
    causal: await ringAttention(mesh, q, k, v, true, attendBlock),
  };
}

/** Attention of this rank's query rows over every rank's K/V rows; the sequence splits evenly. */
async function ringAttention(
  mesh: DeviceMesh,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  causal: boolean,
  /** Declares a block's compute in a predicted run (it overlaps the block passing on). */
  attendBlock: () => void,
): Promise<RingResult> {
  const ring = mesh.group(0);
  const [size, rank] = [ring.size, ring.rank];
  const [rows, dim] = q.shape;
  // K and V travel together as one [2, rows, dim] tensor; `incoming` is where the next block lands.
  let kv = Tensor.cat([k.reshape([1, rows, dim]), v.reshape([1, rows, dim])]);
  let incoming = Tensor.empty(kv.shape);
  const state = new OnlineSoftmax(q.data as Float32Array, rows, dim);
  let blocks = 0;
  for (let step = 0; step < size; step++) {
    const owner = (rank - step + size) % size;
    const passing =
      step === size - 1
        ? []
        : ring.batchIsendIrecv([
            { op: 'isend', tensor: kv, peer: (rank + 1) % size },
            { op: 'irecv', tensor: incoming, peer: (rank - 1 + size) % size },
          ]);
    // Causal: a block of keys from later positions contributes nothing.
    if (!causal || owner <= rank) {
      const [kBlock, vBlock] = kv.chunk(2).map((t) => t.data as Float32Array);
      state.attend(kBlock, vBlock, rows, rank * rows, owner * rows, causal);
      attendBlock();
      blocks++;
    }
    // The peer reads `kv` in place until its receive completes; only then may it be overwritten.
    await Promise.all(passing);
    [kv, incoming] = [incoming, kv];
  }
  const output = DTensor.fromLocal(Tensor.fromArray(state.result(), [rows, dim]), mesh, [Shard(0)]);
  return { blocks, output: (await output.full()).toArray() };
}
