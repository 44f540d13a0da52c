/**
 * Hands one bucket to a set of receivers: what a sender does for the
 * receivers it sends to, and what a relay without node memory does for its
 * node's other receivers (relay.ts). Lent: the header and a view per entry,
 * as one message to each. Packed: the header to each (a relay's with its
 * payload note behind it, protocol.ts), then, once all took it, the
 * payload: one message from a sender, one per entry from a relay. A
 * receiver pairs payloads with buckets by their order on the stream, so a
 * payload goes out only after its source's previous bucket's did (`turn`),
 * even when every receiver took this header first.
 */
import { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import type { WeightSyncConfig } from './options.ts';
import type { PayloadNote } from './protocol.ts';
import { sendRecord } from './record.ts';

/** Orders a source's payload sends by bucket: `after` resolves once the previous bucket's went out. */
export interface PayloadTurn {
  after: Promise<void>;
  issued: () => void;
}

/**
 * A bucket's bytes: lent, one view per entry; packed, the payload's messages to each receiver (none for an
 * empty or skipped bucket).
 */
export type BucketContent =
  | { views: readonly Tensor[] }
  | { payloads: (receiver: number) => readonly Uint8Array[] };

/** `bytes` as a uint8 tensor on the same memory: what p2p sends and receives into. */
export function bytesTensor(bytes: Uint8Array): Tensor {
  return Tensor.fromBuffer(bytes.buffer, bytes.byteOffset, [bytes.byteLength], 'uint8');
}

export async function deliverBucket(
  group: ThreadGroup,
  config: WeightSyncConfig,
  targets: readonly number[],
  header: Uint8Array,
  content: BucketContent,
  turn: PayloadTurn,
  note?: PayloadNote,
): Promise<void> {
  const { tags, timeoutMs, lend } = config;
  if ('views' in content) {
    const options = { tag: tags.header, timeoutMs };
    await Promise.all(targets.map((r) => sendRecord(group, lend, header, content.views, r, options)));
    return;
  }
  const headers = targets.flatMap((r) => {
    const sent = [group.sendObject(header, r, { tag: tags.header, timeoutMs })];
    if (note) sent.push(group.sendObject(note, r, { tag: tags.header, timeoutMs }));
    return sent;
  });
  // The payload waits until every receiver took the header, which it takes only once it has room
  // for the payload (phase).
  await Promise.all(headers);
  await turn.after;
  const sends = targets.flatMap((r) =>
    content.payloads(r).map((bytes) => group.send(bytesTensor(bytes), r, { tag: tags.payload, timeoutMs })),
  );
  turn.issued();
  await Promise.all(sends);
}
