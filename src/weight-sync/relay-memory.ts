/**
 * A relay's node memory (ThreadGroup.nodeMemory): two bucket slots that the
 * relay's network receives land in and that its followers, on its node, map
 * and copy each bucket from, entry by entry, straight to where it goes.
 * Handed on as messages instead, a bucket costs each follower a message per
 * entry through the node's store: a read from the relay's memory each, and
 * the calls around it (a third more CPU per follower, measured). Bucket b
 * takes slot b mod 2, as the reused buffers do, and is overwritten by bucket
 * b + 2 only once every follower acknowledged b and the relay's own caller
 * moved past it (receiver.ts).
 */
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import type { WeightSyncConfig } from './options.ts';

/** Group rank `relay`'s slots: made when the relay asks, mapped when a follower does; undefined where the group maps no node memory. */
export function relayMemory(
  group: ThreadGroup,
  config: WeightSyncConfig,
  relay: number,
): Uint8Array | undefined {
  // Engines sharing a group have different tags: the first names this engine's memory.
  return group.nodeMemory(`weight-sync.${config.tags.header}`, relay, 2 * config.bucketBytes);
}

/** Slot `slot` of a relay's memory. */
export function slotOf(memory: Uint8Array, slot: number, config: WeightSyncConfig): Uint8Array {
  return memory.subarray(slot * config.bucketBytes, (slot + 1) * config.bucketBytes);
}
