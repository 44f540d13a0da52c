/**
 * allReduce of a small host tensor in the group's shared region (see
 * call-region.ts): each rank copies its tensor into its record, the last to
 * arrive reduces every record in rank order into the slot's result and wakes
 * the others at once, and every rank copies the result out. N copies in, one
 * reduction, one wake-up, N copies out, whatever the number of ranks.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { copyBytes } from '../../tensor/shared-copy.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { type CallInfo, COMPLETED } from '../backend.ts';
import { type CallRegion, KIND, OUTCOME } from './call-region.ts';

/** Whether `tensor` is one `region` serves: on the host, contiguous, within its records. */
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
  try {
    copyBytes(region.bytes, region.dataOffset(slot, region.rank), tensor.bytes(), 0, tensor.nbytes);
    if (region.arrive(slot)) {
      outcome = region.judge(slot);
      if (outcome === OUTCOME.reduced) region.reduce(slot, op, tensor.dtype, tensor.numel);
      region.announce(slot, call, outcome);
    } else {
      outcome = region.outcome(slot, call);
    }
  } catch (error) {
    region.depart(slot);
    return Promise.reject(error);
  }
  if (typeof outcome === 'number') return finish(region, slot, call, tensor, outcome, tellKeyed);
  return outcome.then(
    (verdict) => finish(region, slot, call, tensor, verdict, tellKeyed),
    (error) => {
      region.depart(slot);
      throw error;
    },
  );
}

/** Copies the result out, or makes the call's error; leaves the slot either way. */
function finish(
  region: CallRegion,
  slot: number,
  call: CallInfo,
  tensor: Tensor,
  outcome: number,
  tellKeyed: TellKeyed,
): Promise<void> {
  if (outcome === OUTCOME.reduced) {
    region.copyResult(slot, tensor);
    region.depart(slot);
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
