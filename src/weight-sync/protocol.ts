/**
 * The messages of one sync besides the buckets, and the tags they travel on.
 * Per bucket b, its sender (senders[b mod S]) sends each receiver the binary
 * header (header.ts) and then the payload bytes. At the end every sender
 * tells every receiver how many buckets it planned and its stream digest (a
 * sender whose stream differs only in buckets it did not send is caught
 * here); each receiver compares them with what it received and answers every
 * sender with its outcome. A receiver that fails earlier sends its outcome
 * (the error) at once, so senders can report why their transfers stalled.
 */
import { WeightSyncError } from './errors.ts';

/** Default first tag; an engine uses four consecutive tags from `tag` on its group. */
export const DEFAULT_TAG = 0x77530000;

export interface Tags {
  header: number;
  payload: number;
  final: number;
  outcome: number;
}

export function tagsFrom(base: number): Tags {
  return { header: base, payload: base + 1, final: base + 2, outcome: base + 3 };
}

/** Sender → receiver, once per sync: the stream as this sender planned it. */
export interface FinalReport {
  buckets: number;
  digest: number;
}
/** Receiver → sender, once per sync. */
export type Outcome = { ok: true } | { ok: false; error: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Reports and outcomes arrive as structured clones: check their shape before trusting a field. */
export function parseFinal(value: unknown, from: string): FinalReport {
  if (isRecord(value) && Number.isSafeInteger(value.buckets) && Number.isSafeInteger(value.digest)) {
    return { buckets: value.buckets as number, digest: value.digest as number };
  }
  throw new WeightSyncError(`malformed weight-sync final report from ${from}`);
}

export function parseOutcome(value: unknown, from: string): Outcome {
  if (isRecord(value)) {
    if (value.ok === true) return { ok: true };
    if (value.ok === false && typeof value.error === 'string') return { ok: false, error: value.error };
  }
  throw new WeightSyncError(`malformed weight-sync outcome from ${from}`);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Marks a promise's rejection as handled here, because it is awaited (and its error seen) later or on purpose not at all. */
export function quiet<T>(promise: PromiseLike<T>): Promise<T> {
  const p = Promise.resolve(promise);
  p.catch(() => {});
  return p;
}
