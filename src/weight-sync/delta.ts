/**
 * Delta mode (WeightSyncOptions.delta): a sender skips each of its buckets
 * whose content is what it sent in its previous sync, which every receiver
 * still holds. A bucket's delta digest is SHA-1 over its header (the travel
 * fields read as zero, so the sync number does not count) and the digest of
 * every tensor it holds a piece of, whole: a split tensor that changed anywhere
 * marks every bucket it lies in as changed, so a receiver never has to mix a
 * fresh piece with a kept one. SHA-1 stands for "changed or not", not for
 * security: the stream is the trainer's own.
 *
 * The baseline is the last sync whose every receiver said its caller took
 * every tensor (the outcome's `holds`); after one that a receiver's caller
 * left early, the next sync sends every bucket. A receiver checks each
 * skipped bucket against the sync it holds from that sender (receiver.ts),
 * and refuses one it cannot hold: a receiver engine newer than the senders'.
 */
import { createHash } from 'node:crypto';
import type { Tensor } from '../tensor/tensor.ts';
import { TRAVEL_FIELDS } from './header.ts';
import type { PlannedBucket } from './plan.ts';

/** What one sync moved, or (delta mode) left where it was. */
export interface WeightSyncStats {
  /** The sync's number on this engine, from 1. */
  sync: number;
  /** Buckets of the sync: on a receiver all of the stream, on a sender those it sends. */
  buckets: number;
  /** Their used bytes (what travels when a bucket is sent). */
  bytes: number;
  /** Of those, the buckets skipped as unchanged (delta mode), and their bytes. */
  skippedBuckets: number;
  skippedBytes: number;
}

export function emptyStats(sync: number): WeightSyncStats {
  return { sync, buckets: 0, bytes: 0, skippedBuckets: 0, skippedBytes: 0 };
}

export function countBucket(stats: WeightSyncStats, bytes: number, skipped: boolean): void {
  stats.buckets++;
  stats.bytes += bytes;
  if (!skipped) return;
  stats.skippedBuckets++;
  stats.skippedBytes += bytes;
}

/** A sender's delta state, kept from sync to sync. */
export class SenderDelta {
  #sync = 0;
  /** The digests of this sender's buckets in its baseline sync, by bucket index. */
  #baseline: { sync: number; digests: Map<number, string> } | undefined;
  #current = new Map<number, string>();
  /** A split tensor lies in consecutive buckets: its digest is computed once. */
  #lastTensor: { tensor: Tensor; digest: Buffer } | undefined;

  constructor(readonly enabled: boolean) {}

  /** Starts the next sync; returns its number. */
  begin(): number {
    this.#current = new Map();
    this.#lastTensor = undefined;
    return ++this.#sync;
  }

  /**
   * The sync that bucket `bucket` (with header `header`, travel fields not
   * stamped yet) is unchanged since, or 0 when it must be sent.
   */
  unchangedSince(bucket: PlannedBucket, header: Uint8Array): number {
    if (!this.enabled) return 0;
    const hash = createHash('sha1');
    hash.update(header.subarray(0, TRAVEL_FIELDS.from));
    hash.update(header.subarray(TRAVEL_FIELDS.to));
    for (const c of bucket.chunks) hash.update(this.#tensorDigest(c.tensor));
    const digest = hash.digest('base64');
    this.#current.set(bucket.index, digest);
    const baseline = this.#baseline;
    return baseline?.digests.get(bucket.index) === digest ? baseline.sync : 0;
  }

  #tensorDigest(tensor: Tensor): Buffer {
    if (this.#lastTensor?.tensor !== tensor) {
      this.#lastTensor = { tensor, digest: createHash('sha1').update(tensor.bytes()).digest() };
    }
    return this.#lastTensor.digest;
  }

  /** The sync went through; `held`: every receiver's caller took every tensor of it. */
  complete(held: boolean): void {
    this.#baseline = held ? { sync: this.#sync, digests: this.#current } : undefined;
  }
}
