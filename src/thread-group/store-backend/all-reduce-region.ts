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
import { type CallInfo, COMPLETED } from '../backend.ts';
import { type CallRegion, KIND, OUTCOME } from './call-region.ts';

/** Whether `tensor` is one `region` serves: on the host, contiguous, within the largest it takes. */
export function fitsRegion(region: CallRegion, tensor: Tensor): boolean {
  return tensor.device === 'cpu' && tensor.nbytes <= region.maxBytes;
}

/** Tells the peers that took the keyed store for `call` (they wait there for this rank's fingerprint). */
export type TellKeyed = (call: CallInfo, peers: number[]) => Promise<void>;

/**
 * Runs the call; on a mismatch or a peer's local failure, rejects with that
 * error after `tellKeyed` told the peers that took the keyed store. Where the
 * ranks keep pace, every wait ends within the brief synchronous wait and the
 * call costs no promise of its own.
 */
export function allReduceInRegion(
  region: CallRegion,
  call: CallInfo,
  tensor: Tensor,
  op: ReduceOp,
  tellKeyed: TellKeyed,
): Promise<void> {
  const slot = region.enter(call, KIND.region, call.signature);
  if (typeof slot !== 'number') return slot.then((s) => reduceInSlot(region, s, call, tensor, op, tellKeyed));
  return reduceInSlot(region, slot, call, tensor, op, tellKeyed);
}

function reduceInSlot(
  region: CallRegion,
  slot: number,
  call: CallInfo,
  tensor: Tensor,
  op: ReduceOp,
  tellKeyed: TellKeyed,
): Promise<void> {
  let outcome: number | Promise<number>;
  const perChunk = chunkElements(region, tensor);
  const firstChunk = Math.min(tensor.numel, perChunk);
  try {
    region.copyIn(slot, tensor, 0, firstChunk * itemSize(tensor.dtype));
    if (region.arrive(slot)) {
      outcome = region.judge(slot);
      // A tensor of chunks has its reduction shared out once every rank knows the verdict.
      if (outcome === OUTCOME.reduced && tensor.numel <= perChunk)
        region.reduce(slot, op, tensor.dtype, firstChunk);
      region.announce(slot, call, outcome);
    } else {
      outcome = region.outcome(slot, call);
    }
  } catch (error) {
    region.depart(slot);
    return Promise.reject(error);
  }
  if (typeof outcome === 'number') return finish(region, slot, call, tensor, op, outcome, tellKeyed);
  return outcome.then(
    (verdict) => finish(region, slot, call, tensor, op, verdict, tellKeyed),
    (error) => {
      region.depart(slot);
      throw error;
    },
  );
}

/** Elements of `tensor`'s dtype a record holds: a chunk. */
function chunkElements(region: CallRegion, tensor: Tensor): number {
  return Math.floor(region.chunkBytes / itemSize(tensor.dtype));
}

/** Copies the result out (a tensor of chunks: reduces them first), or makes the call's error; leaves the slot either way. */
function finish(
  region: CallRegion,
  slot: number,
  call: CallInfo,
  tensor: Tensor,
  op: ReduceOp,
  outcome: number,
  tellKeyed: TellKeyed,
): Promise<void> {
  if (outcome === OUTCOME.reduced) {
    const perChunk = chunkElements(region, tensor);
    if (tensor.numel > perChunk) {
      return chunks(region, slot, call, tensor, op, perChunk).finally(() => region.depart(slot));
    }
    try {
      region.copyResult(slot, tensor, 0, tensor.nbytes);
    } finally {
      region.depart(slot);
    }
    return COMPLETED;
  }
  let failure: Error;
  let keyed: number[];
  try {
    failure = region.failure(slot, call, outcome);
    // Read before leaving: once every rank left, the slot's records belong to a later call.
    keyed = region.keyedPeers(slot);
  } finally {
    region.depart(slot);
  }
  if (keyed.length === 0) return Promise.reject(failure);
  return tellKeyed(call, keyed).then(() => {
    throw failure;
  });
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
