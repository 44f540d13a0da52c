/** Checks WeightSyncEngine's options against its group, with errors that name the bad argument. */

import { describeValue } from '../tensor/validate.ts';
import { ThreadGroup } from '../thread-group/thread-group.ts';
import { HEADER_LIMITS, PAYLOAD_ALIGN } from './header.ts';
import { DEFAULT_TAG, type Tags, tagsFrom } from './protocol.ts';
import { planRoutes, type Routes } from './routes.ts';

export interface WeightSyncOptions {
  /** Group ranks that hold the weights and send them (each iterates the same stream). */
  senders: readonly number[];
  /** Group ranks that receive them; disjoint from senders. */
  receivers: readonly number[];
  /** Bucket capacity: a positive multiple of 16, at most 2 GiB. Each side holds two buckets. */
  bucketBytes: number;
  /**
   * At most this many buckets in flight at once, over all senders (default: twice the number of senders,
   * a bucket on the wire while the next is sent, as their two buffers each allow).
   */
  phase?: number;
  /** Bound on every wait of a sync, in ms (default 60 000). */
  timeoutMs?: number;
  /**
   * Where the group lends views (ranks as threads: `group.lendsViews`), a
   * sender hands each bucket's tensors over as views on its own memory
   * instead of packing them into its bucket buffer: one copy fewer. Default
   * true; false always packs. The layout, header and result are the same.
   */
  lend?: boolean;
  /** First of the four p2p tags the engine reserves on the group (default 0x77530000); give engines sharing a group different tags. */
  tag?: number;
  /**
   * Receivers: the largest tensor a bucket header may declare (default 4 GiB, what one Tensor holds). A
   * tensor split over buckets is allocated whole when its first piece arrives, so a larger declaration
   * is refused (WeightSyncHeaderError) before anything is allocated for it.
   */
  maxTensorBytes?: number;
  /**
   * Delta mode: a sender sends only the buckets whose content changed since
   * its last sync that every receiver took whole; the others travel as their
   * header alone, and a receiver yields none of their tensors, which its
   * caller must still hold, unchanged, from the sync that brought them.
   * Give every rank the same value: a receiver without it refuses a skipped
   * bucket. Default false. See docs/guides/weight-sync.md, "Delta syncs".
   */
  delta?: boolean;
}

export interface WeightSyncConfig {
  senders: readonly number[];
  receivers: readonly number[];
  bucketBytes: number;
  phase: number;
  timeoutMs: number;
  tags: Tags;
  /** Senders lend their tensors as views (the option, where the group can). */
  lend: boolean;
  maxTensorBytes: number;
  delta: boolean;
  /** Who sends each bucket to whom: direct on one node, through a relay per receiving node across nodes. */
  routes: Routes;
}

export const MAX_BUCKET_BYTES = 2 ** 31;
export const DEFAULT_TIMEOUT_MS = 60_000;
const WHERE = 'new WeightSyncEngine';

function rankList(value: unknown, what: string, size: number): number[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new TypeError(
      `${WHERE}: ${what} must be a non-empty array of group ranks, got ${describeValue(value)}`,
    );
  }
  for (const r of value) {
    if (!Number.isInteger(r) || r < 0 || r >= size) {
      throw new RangeError(
        `${WHERE}: ${what} contains ${String(r)}, which is not a rank of a group of size ${size}`,
      );
    }
  }
  if (new Set(value).size !== value.length)
    throw new RangeError(`${WHERE}: ${what} [${value.join(', ')}] repeats a rank`);
  return [...value];
}

export function resolveOptions(group: unknown, options: unknown): WeightSyncConfig {
  if (!(group instanceof ThreadGroup))
    throw new TypeError(`${WHERE}: group must be a ThreadGroup, got ${describeValue(group)}`);
  if (!group.isMember) throw new RangeError(`${WHERE}: this rank is not a member of group "${group.name}"`);
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(
      `${WHERE}: options must be { senders, receivers, bucketBytes, … }, got ${describeValue(options)}`,
    );
  }
  const o = options as Partial<WeightSyncOptions>;
  const senders = rankList(o.senders, 'senders', group.size);
  const receivers = rankList(o.receivers, 'receivers', group.size);
  const both = senders.filter((r) => receivers.includes(r));
  if (both.length > 0)
    throw new RangeError(`${WHERE}: group rank ${both[0]} is both a sender and a receiver`);
  const bucketBytes = o.bucketBytes;
  if (
    !Number.isSafeInteger(bucketBytes) ||
    bucketBytes! <= 0 ||
    bucketBytes! % PAYLOAD_ALIGN !== 0 ||
    bucketBytes! > MAX_BUCKET_BYTES
  ) {
    throw new RangeError(
      `${WHERE}: bucketBytes must be a positive multiple of ${PAYLOAD_ALIGN} up to ${MAX_BUCKET_BYTES}, got ${String(bucketBytes)}`,
    );
  }
  // With one bucket in flight per sender the wire idles between buckets while the receiver asks for the
  // next; with two, the next goes out while one is on the wire.
  const phase = o.phase ?? 2 * senders.length;
  if (!Number.isSafeInteger(phase) || phase <= 0)
    throw new RangeError(`${WHERE}: phase must be a positive integer, got ${String(phase)}`);
  if (o.timeoutMs !== undefined && !(Number.isFinite(o.timeoutMs) && o.timeoutMs > 0)) {
    throw new RangeError(
      `${WHERE}: timeoutMs must be a positive number of milliseconds, got ${String(o.timeoutMs)}`,
    );
  }
  if (o.lend !== undefined && typeof o.lend !== 'boolean')
    throw new TypeError(`${WHERE}: lend must be a boolean, got ${describeValue(o.lend)}`);
  if (o.delta !== undefined && typeof o.delta !== 'boolean')
    throw new TypeError(`${WHERE}: delta must be a boolean, got ${describeValue(o.delta)}`);
  const maxTensorBytes = o.maxTensorBytes ?? HEADER_LIMITS.maxTensorBytes;
  if (
    !Number.isSafeInteger(maxTensorBytes) ||
    maxTensorBytes < 0 ||
    maxTensorBytes > HEADER_LIMITS.maxTensorBytes
  ) {
    throw new RangeError(
      `${WHERE}: maxTensorBytes must be an integer in 0..${HEADER_LIMITS.maxTensorBytes}, got ${String(o.maxTensorBytes)}`,
    );
  }
  const tag = o.tag ?? DEFAULT_TAG;
  if (!Number.isSafeInteger(tag) || tag < 0)
    throw new RangeError(`${WHERE}: tag must be a non-negative integer, got ${String(tag)}`);
  if (!senders.includes(group.rank) && !receivers.includes(group.rank)) {
    throw new RangeError(
      `${WHERE}: group rank ${group.rank} is neither a sender (${senders.join(', ')}) nor a receiver (${receivers.join(', ')}); only they create the engine`,
    );
  }
  return {
    senders,
    receivers,
    bucketBytes: bucketBytes!,
    phase,
    timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    tags: tagsFrom(tag),
    lend: (o.lend ?? true) && group.lendsViews,
    maxTensorBytes,
    delta: o.delta ?? false,
    routes: planRoutes(senders, receivers, (r) => group.nodeOf(r)),
  };
}
