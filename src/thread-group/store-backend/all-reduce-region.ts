/**
 * allReduce of a small host tensor in the group's shared region (see
 * call-region.ts): each rank copies its tensor into its record, the last to
 * arrive reduces every record in rank order into the slot's result and wakes
 * the others at once, and every rank copies the result out. N copies in, one
 * reduction, one wake-up, N copies out, whatever the number of ranks.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CallInfo } from '../backend.ts';
import { type CallRegion, KIND, OUTCOME, REGION_MAX_BYTES } from './call-region.ts';

/** Whether `tensor` is one the region serves: on the host, contiguous, within the region's record. */
export function fitsRegion(tensor: Tensor): boolean {
  return tensor.device === 'cpu' && tensor.nbytes <= REGION_MAX_BYTES;
}

/**
 * Runs the call; on a mismatch or a peer's local failure, rejects with that
 * error after `tellKeyed` told the peers that took the keyed store (they wait
 * there for this rank's fingerprint).
 */
export async function allReduceInRegion(
  region: CallRegion,
  call: CallInfo,
  tensor: Tensor,
  op: ReduceOp,
  tellKeyed: (peers: number[]) => Promise<void>,
): Promise<void> {
  const slot = await region.enter(call, KIND.region, call.signature);
  let failure: Error;
  let keyed: number[];
  try {
    const bytes = region.bytes;
    const own = tensor.bytes();
    bytes.set(own, region.dataOffset(slot, region.rank));
    let outcome: number;
    if (region.arrive(slot)) {
      outcome = region.judge(slot);
      if (outcome === OUTCOME.reduced) region.reduce(slot, op, tensor.dtype, tensor.numel);
      region.announce(slot, call, outcome);
    } else {
      outcome = await region.outcome(slot, call);
    }
    if (outcome === OUTCOME.reduced) {
      const result = region.resultOffset(slot);
      own.set(bytes.subarray(result, result + own.length));
      return;
    }
    failure = region.failure(slot, call, outcome);
    // Read before leaving: once every rank left, the slot's records belong to a later call.
    keyed = region.keyedPeers(slot);
  } finally {
    region.depart(slot);
  }
  if (keyed.length > 0) await tellKeyed(keyed);
  throw failure;
}
