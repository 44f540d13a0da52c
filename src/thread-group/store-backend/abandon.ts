/**
 * How a rank whose call failed its local checks takes part in the call's
 * first exchange anyway: it publishes a marker carrying its error where data
 * was due and fails every value it would have read, so each peer fails at
 * once with its error instead of timing out.
 */
import { rankMonitor } from '../../debug/monitor.ts';
import type { TensorStore } from '../../runtime/tensor-store.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { ArrivalPattern, CallInfo, GroupView } from '../backend.ts';
import { ABANDONED, type Exchange } from './exchange.ts';

/** How long the marker waits for its readers, and a read for its value, at most. */
export const TELL_TIMEOUT_MS = 5_000;
/** How often a wait checks whether the peers it waits for have failed the call themselves. */
const PEER_CHECK_MS = 25;

interface Arrivals {
  /** Markers this rank publishes: the peers that read each, and the consumer its key names, if one. */
  publishes: Array<{ readers: number[]; consumer?: number }>;
  /** Values this rank would have read: their producer and the consumer their key names, if one. */
  reads: Array<{ producer: number; consumer?: number }>;
}

/** The first-exchange keys `pattern` gives this rank (group rank `me`), given its peers. */
export function arrivals(pattern: ArrivalPattern, me: number, peers: readonly number[]): Arrivals {
  const everyone = { readers: [...peers] };
  const toEach = peers.map((consumer) => ({ readers: [consumer], consumer }));
  switch (pattern.kind) {
    case 'all':
      return { publishes: [everyone], reads: peers.map((producer) => ({ producer })) };
    case 'pairwise':
      return { publishes: toEach, reads: peers.map((producer) => ({ producer, consumer: me })) };
    case 'fromRoot':
      return me === pattern.root
        ? { publishes: [everyone], reads: [] }
        : { publishes: [], reads: [{ producer: pattern.root }] };
    case 'fromRootPairwise':
      return me === pattern.root
        ? { publishes: toEach, reads: [] }
        : { publishes: [], reads: [{ producer: pattern.root, consumer: me }] };
    case 'viaRoot':
      return me === pattern.root
        ? { publishes: [everyone], reads: peers.map((producer) => ({ producer })) }
        : { publishes: [{ readers: [pattern.root] }], reads: [{ producer: pattern.root }] };
    case 'toRoot':
      return me === pattern.root
        ? { publishes: [], reads: peers.map((producer) => ({ producer })) }
        : { publishes: [{ readers: [pattern.root] }], reads: [] };
    case 'send':
      return { publishes: [{ readers: [pattern.peer] }], reads: [] };
    case 'recv':
      return { publishes: [], reads: [{ producer: pattern.peer }] };
  }
}

/** Publishes the markers and fails the reads of `arrivals` on exchange `x`, each bounded. */
export async function tellPeers(
  store: TensorStore,
  group: GroupView,
  x: Exchange,
  call: CallInfo,
  { publishes, reads }: Arrivals,
  error: Error,
): Promise<void> {
  const me = group.rank;
  const marker = Tensor.empty([0], 'uint8');
  const bounded = { timeoutMs: Math.min(call.timeoutMs, TELL_TIMEOUT_MS) };
  const done: Array<Promise<unknown>> = [];
  for (const p of publishes) {
    const key = x.key(0, me, p.consumer);
    await store.srcSet(key, marker, p.readers.length, {
      tag: `${ABANDONED}${error.message}`,
      to: x.globalRanks(p.readers),
    });
    done.push(whileNeeded(store.srcWaitUntilGetFinished(key, bounded), p.readers, group, call));
  }
  for (const r of reads) {
    const key = x.key(0, r.producer, r.consumer);
    const read = store
      .destGet(key, { ...bounded, from: x.globalRank(r.producer) })
      .then(() => store.destFinishGet(key, { error: `rank ${group.ranks[me]}: ${error.message}` }));
    done.push(whileNeeded(read, [r.producer], group, call));
  }
  await Promise.all(done);
}

/**
 * `wait`, for as long as it can matter: a peer that failed this call itself
 * (its status says so, or it has started a later call of the group: it
 * learnt the error elsewhere, e.g. in the group's shared region), or left its
 * main function, neither reads a marker nor publishes what we would read, so
 * once all of `peers` have, the wait is left to end on its own, within its
 * bound (a marker is withdrawn when it does).
 */
async function whileNeeded(
  wait: Promise<unknown>,
  peers: readonly number[],
  group: GroupView,
  call: CallInfo,
): Promise<void> {
  const settled = wait.then(
    () => true,
    () => true,
  );
  const monitor = rankMonitor();
  if (call.seq < 0 || !monitor?.tracksCalls) {
    await settled;
    return;
  }
  const failed = (p: number) =>
    monitor.peerFailure(group.ranks[p], group.id, call.seq) !== undefined ||
    monitor.peerPast(group.ranks[p], group.id, call.seq) ||
    monitor.departure(group.ranks[p]) !== undefined;
  let over = false;
  void settled.then(() => {
    over = true;
  });
  while (!over && !peers.every(failed)) {
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, PEER_CHECK_MS))]);
  }
}
