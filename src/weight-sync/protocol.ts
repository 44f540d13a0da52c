/**
 * The messages of one sync besides the buckets, and the tags they travel on.
 * Per bucket b, its sender (senders[b mod S]) sends each receiver the binary
 * header (header.ts) and then the payload bytes, or, lending, the header with
 * a view per entry in one message (record.ts). After its last bucket every
 * sender closes its header stream to every receiver with a stream end
 * (stream-end.ts): the bucket count and digest it planned, or the error its
 * stream failed with. Each receiver compares them with what it received and
 * answers every sender with its outcome. A receiver that fails earlier sends
 * its outcome (the error) at once, and breaks the receives a sender may be
 * blocked on, so senders learn why at once rather than at a timeout.
 *
 * A relay (routes.ts) hands a packed bucket on with its header and, on the
 * header tag right after it, a note saying where the payload is: in a slot
 * of the relay's node memory (relay-memory.ts), which the follower copies
 * from and then acknowledges on the outcome tag (a relay is no sender, so
 * nothing else comes to it there), or in messages of its own on the payload
 * tag, one per entry, where the group maps no node memory.
 */
import { Work } from '../runtime/work.ts';
import { WeightSyncError } from './errors.ts';

/** Default first tag; an engine reserves four consecutive tags from `tag` on its group (and uses three). */
export const DEFAULT_TAG = 0x77530000;

export interface Tags {
  header: number;
  payload: number;
  outcome: number;
}

export function tagsFrom(base: number): Tags {
  return { header: base, payload: base + 1, outcome: base + 2 };
}

/**
 * A report of a failure waits this many timeouts to be read: its reader learns
 * of it only when it gets to that message, which may be after one of its own
 * waits timed out and it started another.
 */
export const LINGER_TIMEOUTS = 3;

/** Receiver → sender, once per sync. `holds`: its caller took every tensor (delta mode's baseline, delta.ts). */
export type Outcome = { ok: true; holds: boolean } | { ok: false; error: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Outcomes arrive as structured clones: check their shape before trusting a field. */
export function parseOutcome(value: unknown, from: string): Outcome {
  if (isRecord(value)) {
    if (value.ok === true && typeof value.holds === 'boolean') return { ok: true, holds: value.holds };
    if (value.ok === false && typeof value.error === 'string') return { ok: false, error: value.error };
  }
  throw new WeightSyncError(`malformed weight-sync outcome from ${from}`);
}

/** Relay → follower, after a packed bucket's header: where its payload is. */
export type PayloadNote = { slot: number } | { entries: true };

/** Follower → relay, for a bucket it copied out of the relay's node memory: taken, or this follower failed. */
export type Handed = { bucket: number } | { failed: string };

export function parsePayloadNote(value: unknown, from: string): PayloadNote {
  if (isRecord(value)) {
    if (value.entries === true) return { entries: true };
    if (value.slot === 0 || value.slot === 1) return { slot: value.slot };
  }
  throw new WeightSyncError(`malformed payload note from ${from}`);
}

export function parseHanded(value: unknown, from: string): Handed {
  if (isRecord(value)) {
    if (Number.isSafeInteger(value.bucket)) return { bucket: value.bucket as number };
    if (typeof value.failed === 'string') return { failed: value.failed };
  }
  throw new WeightSyncError(`malformed acknowledgement from ${from}`);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Marks a promise's rejection as handled here, because it is awaited (and its error seen) later or on purpose not at all.
 * A Work is returned as it is: its rejection is never unhandled, and a chain on it would be a wait on it (in predict
 * mode the clock that issued it would catch up with it then: predict/timed-work.ts), where it is only let run.
 */
export function quiet<T>(promise: PromiseLike<T>): Promise<T> {
  if (promise instanceof Work) return promise;
  const p = Promise.resolve(promise);
  p.catch(() => {});
  return p;
}

/** Lets `promise` run on with nobody waiting for it: its failure is seen elsewhere (see the call sites). */
export function letGo(promise: PromiseLike<unknown>): void {
  void quiet(promise);
}
