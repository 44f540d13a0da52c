/**
 * How a record of a sender's header stream (a bucket header or its stream
 * end) travels. Packed, it is an object message (sendObject), and a bucket's
 * payload follows on the payload tag. Lent (between threads), it is the first
 * view of one views message, and a bucket's entries are the views behind it:
 * one handshake per bucket and receiver instead of two.
 */
import { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';

export interface ReceivedRecord {
  record: unknown;
  /** Lent: the bucket's entries (none for a stream end), valid until `release`. */
  views: readonly Tensor[];
  /** Hands lent views back (the sender's send completes); copy out of `record` first. */
  release: () => Promise<void>;
}

export interface RecordOptions {
  tag: number;
  timeoutMs: number;
}

const nothingLent = async () => {};

export function sendRecord(
  group: ThreadGroup,
  lend: boolean,
  record: Uint8Array,
  views: readonly Tensor[],
  dst: number,
  options: RecordOptions,
): PromiseLike<void> {
  if (!lend) return group.sendObject(record, dst, options);
  const head = Tensor.fromBuffer(record.buffer, record.byteOffset, [record.byteLength], 'uint8');
  return group.sendViews([head, ...views], dst, options);
}

export async function recvRecord(
  group: ThreadGroup,
  lend: boolean,
  src: number,
  options: RecordOptions,
): Promise<ReceivedRecord> {
  if (!lend) return { record: await group.recvObject(src, options), views: [], release: nothingLent };
  const { views, release } = await group.recvViews(src, options);
  return { record: views[0]?.bytes(), views: views.slice(1), release };
}
