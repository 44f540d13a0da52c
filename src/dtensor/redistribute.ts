/**
 * One redistribute step along one mesh dimension, as the conversion matrix
 * says: Shard → Replicate all-gathers, Partial → Replicate all-reduces,
 * Partial → Shard reduce-scatters, Shard(i) → Shard(j) all-to-alls,
 * Replicate → Shard slices and Replicate → Partial splits the value locally.
 *
 * Shards may be uneven (torch.chunk). allGather and reduceScatter need the
 * same shape on every rank, so pieces travel padded to ceil(n / k) and are
 * trimmed on arrival; allToAll takes per-pair shapes, so it sends them exact.
 * Results are fresh tensors: a step never writes into the local it was given.
 */
import { Tensor } from '../tensor/tensor.ts';
import type { DeviceMesh } from './device-mesh.ts';
import { blockOf, chunkSpan, partitionValue } from './local-block.ts';
import type { Transition } from './redistribute-plan.ts';

export async function runTransition(
  local: Tensor,
  step: Transition,
  globalShape: readonly number[],
  mesh: DeviceMesh,
): Promise<Tensor> {
  const { meshDim, from, to } = step;
  const group = mesh.group(meshDim);
  const k = group.size;
  const c = mesh.coordinate[meshDim];
  // Size of a dim once this step is done: what the gathered pieces add up to.
  const sizeAfter = (dim: number) =>
    blockOf(globalShape, step.after, mesh.shape, mesh.coordinate)[dim].length;

  if (from.kind === 'shard' && to.kind === 'replicate') {
    const d = from.dim;
    const size = sizeAfter(d);
    const piece = Math.ceil(size / k);
    const outputs = Array.from({ length: k }, () =>
      Tensor.empty(resized(local.shape, d, piece), local.dtype),
    );
    await group.allGather(outputs, padded(local, d, piece));
    return Tensor.cat(
      outputs.map((o, j) => o.narrow(d, 0, chunkSpan(size, k, j).length)),
      d,
    );
  }
  if (from.kind === 'shard' && to.kind === 'shard') {
    const [d, e] = [from.dim, to.dim];
    const sizeD = sizeAfter(d);
    const sizeE = local.shape[e];
    const inputs = Array.from({ length: k }, (_, j) => pieceOf(local, e, j, k).contiguous());
    const mine = chunkSpan(sizeE, k, c).length;
    const outputs = Array.from({ length: k }, (_, j) =>
      Tensor.empty(resized(resized(local.shape, d, chunkSpan(sizeD, k, j).length), e, mine), local.dtype),
    );
    await group.allToAll(outputs, inputs);
    return Tensor.cat(outputs, d);
  }
  if (from.kind === 'replicate' && to.kind === 'shard') return pieceOf(local, to.dim, c, k).clone();
  if (from.kind === 'partial' && to.kind === 'replicate') {
    const sum = local.clone();
    await group.allReduce(sum, { op: from.op });
    return sum;
  }
  if (from.kind === 'partial' && to.kind === 'shard') {
    const d = to.dim;
    const piece = Math.ceil(local.shape[d] / k);
    const inputs = Array.from({ length: k }, (_, j) => padded(pieceOf(local, d, j, k), d, piece));
    const output = Tensor.empty(resized(local.shape, d, piece), local.dtype);
    await group.reduceScatter(output, inputs, { op: from.op });
    return output.narrow(d, 0, chunkSpan(local.shape[d], k, c).length).contiguous();
  }
  if (from.kind === 'replicate' && to.kind === 'partial') return partitionValue(local, to.op, k, c);
  // planRedistribute never emits the remaining pairs (Shard → Partial, Partial → Partial).
  throw new Error(`redistribute: no step from ${from.kind} to ${to.kind}`);
}

/** Piece `j` of `k` of `t` along `dim` (a view). */
function pieceOf(t: Tensor, dim: number, j: number, k: number): Tensor {
  const span = chunkSpan(t.shape[dim], k, j);
  return t.narrow(dim, span.offset, span.length);
}

function resized(shape: readonly number[], dim: number, size: number): number[] {
  const out = [...shape];
  out[dim] = size;
  return out;
}

/** `t` contiguous with `dim` zero-padded to `size` entries. */
function padded(t: Tensor, dim: number, size: number): Tensor {
  if (t.shape[dim] === size) return t.contiguous();
  const out = Tensor.zeros(resized(t.shape, dim, size), t.dtype);
  out.narrow(dim, 0, t.shape[dim]).copy_(t);
  return out;
}
