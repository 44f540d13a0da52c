/**
 * The relay's forwarding, on a receiver that takes some senders' buckets from
 * the network for its node's other receivers (routes.ts). Each bucket is
 * handed on as soon as it has landed here, while this rank already receives
 * the next from the network, so the relay adds about one bucket's time. A
 * packed bucket lands in the relay's node memory (relay-memory.ts), where
 * the group maps some: the followers get its header and the slot it is in,
 * copy it from there and acknowledge it; elsewhere it goes on as messages,
 * one per entry to each follower (deliver.ts). The
 * buckets go on one after the other in stream order, whatever order they
 * landed in (several senders' do not land in order), since a follower takes
 * every relayed bucket, and the senders' stream ends, from this rank's one
 * stream of messages. A relay that fails tells its followers in its own
 * name, as a failed stream end where they wait for their next header, and
 * breaks a payload receive they may be blocked in.
 */
import { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import { type BucketContent, deliverBucket, type PayloadTurn } from './deliver.ts';
import { WeightSyncError } from './errors.ts';
import type { BucketHeader } from './header.ts';
import type { WeightSyncConfig } from './options.ts';
import { LINGER_TIMEOUTS, letGo, messageOf, type PayloadNote, parseHanded, quiet } from './protocol.ts';
import { sendRecord } from './record.ts';
import { encodeStreamEnd } from './stream-end.ts';

/** Forwards are chained (each starts once the one before is taken), so each payload's turn has already come. */
const OWN_TURN: PayloadTurn = { after: Promise.resolve(), issued: () => {} };
/** A bucket in node memory: its header and note are all a follower is sent. */
const NO_PAYLOAD: BucketContent = { payloads: () => [] };

/**
 * What a relay hands on: a bucket as it landed here, with the note that tells a follower where a packed
 * payload is (none for a lent, empty or skipped bucket), or a bucket in slot `slot` of its node memory.
 */
export type RelayedContent = { content: BucketContent; note?: PayloadNote } | { slot: number };

/** Whether a relay sends a note behind this bucket's header: a packed bucket with a payload to take. */
export function carriesPayloadNote(header: BucketHeader): boolean {
  return !header.views && header.unchangedSince === 0 && header.payloadBytes > 0;
}

export class Relay {
  readonly #group: ThreadGroup;
  readonly #config: WeightSyncConfig;
  readonly #where: string;
  /** Per relayed bucket: settles once it was handed on; the next relayed bucket starts after it, and fails with it. */
  readonly #handedOn = new Map<number, Deferred>();
  #stopped = false;

  constructor(group: ThreadGroup, config: WeightSyncConfig, where: string) {
    this.#group = group;
    this.#config = config;
    this.#where = where;
  }

  /** Whether this rank hands bucket `index` on (its sender is on another node and this rank relays it). */
  #relays(index: number): boolean {
    const { senders, routes } = this.#config;
    return routes.followersOf(this.#group.rank, senders[index % senders.length]).length > 0;
  }

  #deferred(index: number): Deferred {
    let d = this.#handedOn.get(index);
    if (!d) {
      let settle!: (outcome: Promise<void>) => void;
      const promise = quiet(new Promise<void>((resolve) => (settle = resolve)));
      d = { promise, settle };
      this.#handedOn.set(index, d);
    }
    return d;
  }

  /** Every receiver this rank hands some sender's buckets on to. */
  get followers(): number[] {
    const { senders, routes } = this.#config;
    return [...new Set(senders.flatMap((s) => routes.followersOf(this.#group.rank, s)))];
  }

  /** Hands bucket `index` on to `followers` after the bucket before; resolves once they all took it. */
  forward(
    index: number,
    followers: readonly number[],
    header: Uint8Array,
    relayed: RelayedContent,
  ): Promise<void> {
    const send = async () => {
      if (this.#stopped) throw new WeightSyncError('this relay stopped');
      if ('slot' in relayed) return this.#handSlot(index, followers, header, relayed.slot);
      const { content, note } = relayed;
      return deliverBucket(this.#group, this.#config, followers, header, content, OWN_TURN, note);
    };
    let previous = index - 1;
    while (previous >= 0 && !this.#relays(previous)) previous--;
    const after = previous < 0 ? Promise.resolve() : this.#deferred(previous).promise;
    // A failure of the bucket before passes through as is: it was named there.
    const handed = after.then(() =>
      send().catch((error: unknown) => {
        throw new WeightSyncError(
          `${this.#where}: relay ${this.#group.rank} could not hand bucket ${index} on to receiver(s) ` +
            `${followers.join(', ')} on its node: ${messageOf(error)}`,
          { cause: error },
        );
      }),
    );
    const d = this.#deferred(index);
    d.settle(handed);
    return d.promise;
  }

  /** Tells each follower that bucket `index` is in slot `slot` of this relay's node memory; resolves once all took it. */
  async #handSlot(
    index: number,
    followers: readonly number[],
    header: Uint8Array,
    slot: number,
  ): Promise<void> {
    const note: PayloadNote = { slot };
    await deliverBucket(this.#group, this.#config, followers, header, NO_PAYLOAD, OWN_TURN, note);
    const { tags, timeoutMs } = this.#config;
    await Promise.all(
      followers.map(async (f) => {
        const answer = await this.#group.recvObject(f, { tag: tags.outcome, timeoutMs });
        const handed = parseHanded(answer, `receiver ${f}`);
        if ('failed' in handed) throw new WeightSyncError(`receiver ${f} failed: ${handed.failed}`);
        if (handed.bucket !== index)
          throw new WeightSyncError(
            `receiver ${f} acknowledged bucket ${handed.bucket} where bucket ${index} was due`,
          );
      }),
    );
  }

  /** A sender's stream end, checked here, goes on behind the last bucket handed on. */
  forwardEnd(followers: readonly number[], record: Uint8Array): void {
    const { tags, timeoutMs, lend } = this.#config;
    const options = { tag: tags.header, timeoutMs };
    // Sent after every bucket was handed on (the receiver gets here only then). A follower that
    // fails never takes it; it tells the senders itself.
    for (const f of followers) letGo(sendRecord(this.#group, lend, record, [], f, options));
  }

  /** Tells every follower this relay failed, naming it, and hands nothing more on. */
  fail(error: unknown): void {
    if (this.#stopped) return;
    this.#stopped = true;
    const { tags, timeoutMs, lend } = this.#config;
    const followers = this.followers;
    if (followers.length === 0) return;
    const record = encodeStreamEnd({
      failed: true,
      error: `relay ${this.#group.rank} (receiving for ${followers.join(', ')}) failed: ${messageOf(error)}`,
    });
    // Read when the follower gets to it, which may be after one of its own waits timed out.
    const linger = { tag: tags.header, timeoutMs: LINGER_TIMEOUTS * timeoutMs };
    // A follower blocked in a payload receive from this relay is broken out of it by a send that
    // cannot match (p2p size mismatch fails both ends); it then reads the record above.
    const nothing = Tensor.empty([0], 'uint8');
    for (const f of followers) {
      letGo(sendRecord(this.#group, lend, record, [], f, linger));
      letGo(this.#group.send(nothing, f, { tag: tags.payload, timeoutMs }));
    }
  }
}

interface Deferred {
  promise: Promise<void>;
  settle: (outcome: Promise<void>) => void;
}
