/**
 * allReduce of a host tensor in the group's shared region (see
 * call-region.ts): each rank copies its tensor into its record, the last to
 * arrive reduces every record in rank order into the slot's result and wakes
 * the others at once, and every rank copies the result out. N copies in, one
 * reduction, one wake-up, N copies out, whatever the number of ranks. A
 * tensor larger than a record goes a record's worth at a time, each chunk's
 * reduction shared out among the ranks (call-region.ts).
 */
import { itemSize } from '../../tensor/dtype.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo } from '../backend.ts';
import type { CallRegion } from './call-region.ts';
import { meetInRegion, type RegionSteps, type TellKeyed } from './region-call.ts';

/** Whether `tensor` is one `region` serves: on the host, contiguous, within the largest it takes. */
export function fitsRegion(region: CallRegion, tensor: Tensor): boolean {
  return tensor.device === 'cpu' && tensor.nbytes <= region.maxBytes;
}

/** allReduce's steps: the first chunk in, reduced by the last arrival where it is the whole tensor, the result out. */
const ALL_REDUCE: RegionSteps<Tensor, ReduceOp> = {
  bring(region, slot, tensor) {
    region.copyIn(
      slot,
      tensor,
      0,
      Math.min(tensor.numel, chunkElements(region, tensor)) * itemSize(tensor.dtype),
    );
  },
  // A tensor of chunks has its reduction shared out once every rank knows the verdict.
  settle(region, slot, tensor, op) {
    if (tensor.numel <= chunkElements(region, tensor)) region.reduce(slot, op, tensor.dtype, tensor.numel);
  },
  take(region, slot, call, tensor, op) {
    const perChunk = chunkElements(region, tensor);
    if (tensor.numel > perChunk) return chunks(region, slot, call, tensor, op, perChunk);
    region.copyResult(slot, tensor, 0, tensor.nbytes);
  },
};

/** See region-call.ts: on a mismatch or a peer's local failure, rejects after `tellKeyed` told the keyed peers. */
export function allReduceInRegion(
  region: CallRegion,
  call: CallInfo,
  tensor: Tensor,
  op: ReduceOp,
  tellKeyed: TellKeyed,
): Promise<void> {
  return meetInRegion(region, call, ALL_REDUCE, tensor, op, tellKeyed);
}

/** Elements of `tensor`'s dtype a record holds: a chunk. */
function chunkElements(region: CallRegion, tensor: Tensor): number {
  return Math.floor(region.chunkBytes / itemSize(tensor.dtype));
}

/**
 * The chunks of a call whose verdict was `reduced`, the first already in
 * the records: each brought by every rank (after the first), reduced a
 * share by each, then copied out (call-region.ts).
 */
async function chunks(
  region: CallRegion,
  slot: number,
  call: CallInfo,
  tensor: Tensor,
  op: ReduceOp,
  perChunk: number,
): Promise<void> {
  const size = itemSize(tensor.dtype);
  const count = Math.ceil(tensor.numel / perChunk);
  for (let chunk = 0, start = 0; chunk < count; chunk++, start += perChunk) {
    const numel = Math.min(perChunk, tensor.numel - start);
    if (chunk > 0) {
      region.copyIn(slot, tensor, start * size, numel * size);
      await region.bringChunk(slot, call, chunk, count);
    }
    region.reduceShare(slot, op, tensor.dtype, numel);
    await region.shareReduced(slot, call, chunk, count);
    region.copyResult(slot, tensor, start * size, numel * size);
  }
}
