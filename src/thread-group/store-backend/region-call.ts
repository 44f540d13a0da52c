/**
 * One collective in the group's shared region (call-region.ts), whatever it
 * moves: each rank brings its data into its record, the last to arrive
 * judges the records (and does the work every rank shares, as allReduce's
 * reduction) and wakes the others at once, and each rank takes its result,
 * from the slot's result or straight from its peers' records, before it
 * leaves the slot. The algorithm is a set of steps over two arguments of the
 * call (no object per call: the 4 B allReduce is a microsecond). On a
 * mismatch or a peer's local failure the call rejects with that error, after
 * `tellKeyed` told the peers that took the keyed store. Where the ranks keep
 * pace every wait ends within the brief synchronous wait, and the call costs
 * no promise of its own.
 */
import type { Tensor } from '../../tensor/tensor.ts';
import { type CallInfo, COMPLETED } from '../backend.ts';
import { type CallRegion, KIND, OUTCOME } from './call-region.ts';

/**
 * Whether a call that brings `bytes` to a record, of host `tensors` alone, meets in the region: in
 * one round, so within a record (a chunk). Up to that the region's two copies beat the keyed store's
 * handshakes even between thread ranks, which read each other's tensors in place there: 2 ranks,
 * 256 KiB, a broadcast took 16-20 µs here against 24-27, an allGather 17.5 against 50.
 */
export function fitsRecord(
  region: CallRegion,
  bytes: number,
  tensors: readonly (Tensor | undefined)[],
): boolean {
  return bytes <= region.chunkBytes && tensors.every((t) => t === undefined || t.device === 'cpu');
}

/** Tells the peers that took the keyed store for `call` (they wait there for this rank's fingerprint). */
export type TellKeyed = (call: CallInfo, peers: number[]) => Promise<void>;

/** What a collective does in its slot, given its two arguments `a` and `b`. */
export interface RegionSteps<A, B> {
  /**
   * Whether this rank's data fits its record, where ranks may bring different amounts (allToAll);
   * where one rank's does not, every rank runs the call's keyed algorithm (`declined`) instead.
   * Absent: it fits (the call's size is the same on every rank, and the caller chose the region by it).
   */
  fits?(region: CallRegion, a: A, b: B): boolean;
  /** This rank's data into its record: at most a record's (region.chunkBytes). */
  bring(region: CallRegion, slot: number, a: A, b: B): void;
  /** The last arrival, every rank having made this call in the region: what it does for all before they take. */
  settle?(region: CallRegion, slot: number, a: A, b: B): void;
  /** This rank's result; a promise where the call goes on in further rounds in the slot (a tensor of chunks). */
  take(region: CallRegion, slot: number, call: CallInfo, a: A, b: B): void | Promise<void>;
}

/** The keyed store's algorithm for a call some rank's data did not fit the region for (RegionSteps.fits). */
export type Declined = () => Promise<void>;

export function meetInRegion<A, B>(
  region: CallRegion,
  call: CallInfo,
  steps: RegionSteps<A, B>,
  a: A,
  b: B,
  tellKeyed: TellKeyed,
  declined?: Declined,
): Promise<void> {
  // A rank whose data does not fit passes through at once, and its peers that fit follow it to the keyed store.
  if (steps.fits !== undefined && !steps.fits(region, a, b))
    return region.decline(call).then(declined as Declined);
  const slot = region.enter(call, KIND.region, call.signature);
  if (typeof slot !== 'number')
    return slot.then((s) => inSlot(region, s, call, steps, a, b, tellKeyed, declined));
  return inSlot(region, slot, call, steps, a, b, tellKeyed, declined);
}

function inSlot<A, B>(
  region: CallRegion,
  slot: number,
  call: CallInfo,
  steps: RegionSteps<A, B>,
  a: A,
  b: B,
  tellKeyed: TellKeyed,
  declined: Declined | undefined,
): Promise<void> {
  let outcome: number | Promise<number>;
  try {
    steps.bring(region, slot, a, b);
    if (region.arrive(slot)) {
      outcome = region.judge(slot);
      if (outcome === OUTCOME.reduced) steps.settle?.(region, slot, a, b);
      region.announce(slot, call, outcome);
    } else {
      outcome = region.outcome(slot, call);
    }
  } catch (error) {
    region.depart(slot);
    return Promise.reject(error);
  }
  if (typeof outcome === 'number')
    return finish(region, slot, call, steps, a, b, outcome, tellKeyed, declined);
  return outcome.then(
    (verdict) => finish(region, slot, call, steps, a, b, verdict, tellKeyed, declined),
    (error) => {
      region.depart(slot);
      throw error;
    },
  );
}

/** Takes the result, or makes the call's error; leaves the slot either way. */
function finish<A, B>(
  region: CallRegion,
  slot: number,
  call: CallInfo,
  steps: RegionSteps<A, B>,
  a: A,
  b: B,
  outcome: number,
  tellKeyed: TellKeyed,
  declined: Declined | undefined,
): Promise<void> {
  if (outcome === OUTCOME.declined) {
    region.depart(slot);
    // Only steps that can decline (fits) come here, and the calls compared alike: their caller gave the algorithm.
    return (declined as Declined)();
  }
  if (outcome === OUTCOME.reduced) {
    let taken: void | Promise<void>;
    try {
      taken = steps.take(region, slot, call, a, b);
    } catch (error) {
      region.depart(slot);
      return Promise.reject(error);
    }
    if (taken === undefined) {
      region.depart(slot);
      return COMPLETED;
    }
    return taken.finally(() => region.depart(slot));
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
