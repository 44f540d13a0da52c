/**
 * The receiving side of a sync. Bucket b comes from senders[b mod S]: first
 * its header (checked, and its digest compared with the one this receiver
 * computes), then its payload.
 *
 * Packed payloads (between processes, or `lend: false`): when borrowing, the
 * sender lends its bucket where the group can (recvBorrowed) and gets it back
 * when the caller moves past it, or the payload lands in one of two buffers
 * this receiver keeps, bucket b+2 reusing b's only after the caller moved
 * past b. Otherwise each payload lands in memory of its own handed to the
 * caller (one allocation per bucket, not per tensor), so nothing the caller
 * holds is ever overwritten. A header is taken only once bucket b − phase has
 * arrived, and a sender sends a payload only after every receiver took its
 * header, so at most `phase` buckets are in flight.
 *
 * Lent payloads (`lend`, between threads): one view per entry on the
 * sender's own tensors, in the same views message as the header (record.ts).
 * Borrowing yields them as they are, until the caller moves past the bucket; otherwise
 * they are copied into memory of the caller's own and given back at once.
 * Each bucket is taken when the caller gets to it; what is in flight is then
 * bounded by the senders, two buckets each.
 *
 * From a sender on another node a packed bucket comes in pieces
 * (pieces.ts), a large entry alone straight into its `into` target, or the
 * relay's node memory, or its place in the bucket's buffer.
 *
 * Across nodes (routes.ts) a receiver takes a sender's buckets from its
 * node's relay unless it is on the sender's node or is that relay. The relay
 * hands each bucket on (relay.ts) as soon as it has landed, and reuses or
 * gives back its memory only once every follower has it; a caller of its own
 * that does not borrow (and may change its tensors) gets it only then too.
 * A packed bucket the relay hands on lands in its node memory
 * (relay-memory.ts), one of two slots, from which each follower copies
 * every entry straight to where it goes (its target, with `into`), and the
 * relay's own caller too (into memory of its own, not borrowing). Where the
 * group maps no node memory the relay hands it on as one message per entry,
 * each written where the follower wants it. Either way a follower copies
 * each byte once; the note behind each header (protocol.ts) says which.
 *
 * With `into` a receiver lands buckets as when borrowing (reused buffers,
 * lent buckets), since the caller keeps no bucket memory: a target is
 * copied into from the bucket, and a tensor `into` does not give is yielded
 * as a view or, not borrowing, as a copy of its own.
 *
 * Delta mode (delta.ts): a skipped bucket is its header alone. It is taken
 * only from a sender whose sync it is unchanged since is the one this
 * receiver holds from it (its caller took every tensor of it); else the sync
 * is refused before anything of the bucket is yielded.
 */
import { CollectiveMismatchError } from '../runtime/errors.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import { ChunkAssembler } from './assembler.ts';
import { bytesTensor } from './deliver.ts';
import { countBucket, emptyStats, type WeightSyncStats } from './delta.ts';
import { chainDigest, DIGEST_SEED, hex } from './digest.ts';
import { WeightSyncError, WeightSyncHeaderError } from './errors.ts';
import { type BucketHeader, decodeBucketHeader, startedTensors } from './header.ts';
import { type Landing, type LoadInto, landingsOf } from './into.ts';
import type { WeightSyncConfig } from './options.ts';
import { isAlone, piecesOf } from './pieces.ts';
import {
  type Handed,
  LINGER_TIMEOUTS,
  letGo,
  messageOf,
  type PayloadNote,
  parsePayloadNote,
  quiet,
} from './protocol.ts';
import { type ReceivedRecord, recvRecord } from './record.ts';
import { carriesPayloadNote, Relay, type RelayedContent } from './relay.ts';
import { relayMemory, slotOf } from './relay-memory.ts';
import { onOtherNode } from './routes.ts';
import { decodeStreamEnd, isStreamEnd, type StreamEnd } from './stream-end.ts';

export class BucketReceiver {
  readonly #group: ThreadGroup;
  readonly #config: WeightSyncConfig;
  /** Delta mode: per sender, its last sync whose every tensor this receiver's caller took. */
  readonly #holds = new Map<number, number>();
  #buffers: Uint8Array[] | undefined;
  /**
   * Node memory of relays by group rank (relay-memory.ts): this rank's own, made when it first relays a
   * packed bucket, and that of each relay it follows, mapped at its first note; kept across syncs.
   */
  readonly #relayMemories = new Map<number, Uint8Array | undefined>();
  lastSync: WeightSyncStats | undefined;

  constructor(group: ThreadGroup, config: WeightSyncConfig) {
    this.#group = group;
    this.#config = config;
  }

  receive(borrow: boolean, into: LoadInto | undefined, where: string): AsyncGenerator<[string, Tensor]> {
    const reused = borrow || into !== undefined ? this.#reused : undefined;
    const landing = { reused, into, copyViews: into !== undefined && !borrow, memoryOf: this.#memoryOf };
    const done = (stats: WeightSyncStats) => {
      this.lastSync = stats;
    };
    return new ReceiveSession(this.#group, this.#config, landing, this.#holds, done, where).run();
  }

  readonly #memoryOf = (relay: number): Uint8Array | undefined => {
    if (!this.#relayMemories.has(relay))
      this.#relayMemories.set(relay, relayMemory(this.#group, this.#config, relay));
    return this.#relayMemories.get(relay);
  };

  /** Reused buffer `slot`, allocated on first use (a packed bucket received borrowing) and kept for later syncs. */
  readonly #reused = (slot: number): Uint8Array => {
    this.#buffers ??= [0, 1].map(() => new Uint8Array(new SharedArrayBuffer(this.#config.bucketBytes)));
    return this.#buffers[slot];
  };
}

/** Where a session's buckets land. */
interface SessionLanding {
  /** The two reused buffers (borrowing, or `into`); undefined when each bucket gets memory of its own. */
  reused: ((slot: number) => Uint8Array) | undefined;
  into: LoadInto | undefined;
  /** A tensor yielded from reused memory is copied out of it (`into` without `borrow`). */
  copyViews: boolean;
  /** Relay `relay`'s node memory, where its buckets land and its followers take them from. */
  memoryOf: (relay: number) => Uint8Array | undefined;
}

class ReceiveSession {
  readonly #group: ThreadGroup;
  readonly #config: WeightSyncConfig;
  /** The two reused buffers (borrowing, or `into`); undefined when each bucket gets memory of its own. */
  readonly #reused: ((slot: number) => Uint8Array) | undefined;
  readonly #into: LoadInto | undefined;
  /** Where each received bucket's entries are (one chunk per entry), until the caller moves past it. */
  readonly #landed = new Map<number, Uint8Array[]>();
  /** Per bucket, where each entry goes in the caller's `into` (checked with its header), until the caller moves past it. */
  readonly #landings = new Map<number, Array<Landing | undefined>>();
  /** Lent buckets taken with their header, until their entries are checked and landed. */
  readonly #lentViews = new Map<number, ReceivedRecord>();
  /** Buckets lent by their sender (borrowing): returned when the caller moves past them. */
  readonly #loans = new Map<number, () => Promise<void>>();
  readonly #where: string;
  /** Lazily created per bucket index; each step starts once what it depends on is done. */
  readonly #headers: Promise<BucketHeader | undefined>[] = [];
  readonly #payloads: Promise<BucketHeader | undefined>[] = [];
  /** Resolves once bucket i's payload receive has been posted (or turned out not to be needed). */
  readonly #posted: Promise<void>[] = [];
  readonly #released: Array<() => void> = [];
  readonly #releasedPromises: Promise<void>[] = [];
  readonly #assembler: ChunkAssembler;
  /** Relaying: each bucket's header as received, until it is handed on with the payload. */
  readonly #rawHeaders = new Map<number, Uint8Array>();
  /** Relaying: resolves once bucket i was handed on to this rank's followers. */
  readonly #forwarded: Promise<void>[] = [];
  readonly #relay: Relay;
  readonly #memoryOf: (relay: number) => Uint8Array | undefined;
  /** From a relay: where each bucket's payload is (its note), until the payload is taken. */
  readonly #notes = new Map<number, PayloadNote>();
  /** Relays that handed this rank a bucket in their node memory: they wait for its acknowledgements. */
  readonly #slotRelays = new Set<number>();
  /**
   * Per source, its header takes (the header's receive, and the relay's note behind it) begun and not yet
   * settled, and the first failure one met: a relay's failed stream end goes to the first posted
   * (#brokenByRelay).
   */
  readonly #headerTagWaits = new Map<number, Promise<unknown>[]>();
  readonly #headerTagFailures = new Map<number, unknown>();
  /** Delta mode: what this receiver holds, per sender (BucketReceiver), and each sender's sync number here. */
  readonly #holds: Map<number, number>;
  readonly #syncs = new Map<number, number>();
  readonly #done: (stats: WeightSyncStats) => void;
  #stats: WeightSyncStats = emptyStats(0);
  #digest = DIGEST_SEED;
  #buckets = 0;
  #tensors = 0;
  #outcomeSent = false;
  #failed = false;

  constructor(
    group: ThreadGroup,
    config: WeightSyncConfig,
    landing: SessionLanding,
    holds: Map<number, number>,
    done: (stats: WeightSyncStats) => void,
    where: string,
  ) {
    this.#memoryOf = landing.memoryOf;
    this.#group = group;
    this.#config = config;
    this.#reused = landing.reused;
    this.#into = landing.into;
    this.#assembler = new ChunkAssembler(landing.copyViews);
    this.#holds = holds;
    this.#done = done;
    this.#where = where;
    this.#relay = new Relay(group, config, where);
  }

  async *run(): AsyncGenerator<[string, Tensor]> {
    let index = 0;
    let ended = false;
    try {
      while (!ended) {
        const header = await this.#next(index);
        if (header.unchangedSince > 0) this.#assembler.skip(header);
        else yield* this.#assembler.tensors(header, this.#landed.get(index)!, this.#landings.get(index));
        ended = header.last;
        this.#release(index++);
      }
      await this.#agree(true);
    } catch (error) {
      throw this.#fail(error);
    } finally {
      // The caller left early: take the rest of the stream anyway, so the senders finish and the engine stays in step.
      if (!ended && !this.#failed) await this.#drain(index);
    }
  }

  async #drain(index: number): Promise<void> {
    try {
      for (let last = false; !last; index++) {
        last = (await this.#next(index)).last;
        this.#release(index);
      }
      // The caller did not take the tensors from here on: it does not hold this sync (delta.ts).
      await this.#agree(false);
    } catch (error) {
      throw this.#fail(error);
    }
  }

  /** Bucket `index` once its payload is in its buffer; also starts the headers and payload that may run ahead. */
  async #next(index: number): Promise<BucketHeader> {
    // Lent buckets come with their header (the sender does not wait for it to be taken). A receive
    // posted early parks, and its wake-up waits for this thread's event loop, which is busy while the
    // caller copies; one posted when the caller gets there finds the bucket waiting and takes it at once.
    const ahead = this.#config.lend ? 0 : this.#config.phase;
    for (let k = index; k <= index + ahead; k++) {
      void this.#header(k);
      void this.#payload(k);
    }
    const header = await this.#payload(index);
    if (header === undefined)
      throw new WeightSyncError(`bucket ${index} was read past the end of the stream`);
    // A relay's caller may change tensors of its own, so it gets them once its followers have them. Borrowed
    // views are only read: the caller has them at once, and their memory is reused or lent back only once
    // the followers have them too (#release); a forward's failure surfaces a bucket later.
    await this.#forwarded[this.#reused ? index - 1 : index];
    return header;
  }

  /** Undefined past the last bucket: no receive is posted for a bucket that does not exist. */
  #header(index: number): Promise<BucketHeader | undefined> {
    this.#headers[index] ??= quiet(
      Promise.all([
        index === 0 ? null : this.#header(index - 1),
        index >= this.#config.phase ? this.#payload(index - this.#config.phase) : null,
      ]).then(([previous]) =>
        previous === undefined || previous?.last
          ? undefined
          : this.#headerTagWait(this.#source(this.#sender(index)), this.#takeHeader(index)),
      ),
    );
    return this.#headers[index];
  }

  #payload(index: number): Promise<BucketHeader | undefined> {
    const existing = this.#payloads[index];
    if (existing) return existing;
    // A sender's p2p stream numbers its payloads in the order it sends them, so this receive may be
    // posted only after the one for the bucket before it (buffers can be released out of that order).
    if (index > 0) void this.#payload(index - 1);
    const previousPosted = index === 0 ? null : this.#posted[index - 1];
    let markPosted!: () => void;
    this.#posted[index] = new Promise((resolve) => {
      markPosted = resolve;
    });
    const payload = quiet(
      Promise.all([this.#header(index), previousPosted])
        .then(async ([header]) => {
          // A packed payload lands in a reused buffer or in new memory: it waits until the caller moved
          // past bucket index − 2. Lent views take no memory here and need not wait.
          if (header !== undefined && !header.views && index >= 2) await this.#releasedAt(index - 2);
          return header;
        })
        .then(
          (header) => {
            const taken = header === undefined ? undefined : this.#takePayload(header);
            markPosted();
            return taken;
          },
          (error: unknown) => {
            markPosted();
            throw error;
          },
        ),
    );
    this.#payloads[index] = payload;
    return payload;
  }

  #releasedAt(index: number): Promise<void> {
    this.#releasedPromises[index] ??= new Promise((resolve) => {
      this.#released[index] = resolve;
    });
    return this.#releasedPromises[index];
  }

  #release(index: number): void {
    this.#landed.delete(index);
    this.#landings.delete(index);
    const loan = this.#loans.get(index);
    this.#loans.delete(index);
    // Made here if nobody waits for it yet, so that its resolver exists.
    void this.#releasedAt(index);
    const free = () => {
      // A failed release is the sender's failure too: it reaches this receiver through the stream's next step.
      if (loan) letGo(loan());
      this.#released[index]();
    };
    // Relaying: the bucket is free once the followers have it too (a failed forward surfaces in #next).
    const handedOn = this.#forwarded[index];
    if (handedOn) handedOn.then(free, free);
    else free();
  }

  #sender(index: number): number {
    return this.#config.senders[index % this.#config.senders.length];
  }

  /** Where this rank takes sender `s`'s messages from: `s`, or its node's relay. */
  #source(s: number): number {
    return this.#config.routes.sourceOf(s, this.#group.rank);
  }

  /** A receive from a relay that fails names the relay: its failure is why. `what`: 'bucket 3', 'the stream end'. */
  #fromRelay<T>(what: string, sender: number, receive: Promise<T>): Promise<T> {
    const source = this.#source(sender);
    if (source === sender) return receive;
    return receive.catch((error: unknown) => {
      throw new WeightSyncError(
        `${this.#where}: ${what} of sender ${sender}, through relay ${source}: ${messageOf(error)}`,
        { cause: error },
      );
    });
  }

  async #takeHeader(index: number): Promise<BucketHeader> {
    const { tags, timeoutMs, lend } = this.#config;
    const sender = this.#sender(index);
    const source = this.#source(sender);
    const receiving = recvRecord(this.#group, lend, source, { tag: tags.header, timeoutMs });
    const received = await this.#fromRelay(`bucket ${index}`, sender, receiving).catch((error: unknown) => {
      // The one mismatch a record can meet: a message of the other kind, lent where packed was due or back.
      if (!(error instanceof CollectiveMismatchError)) throw error;
      throw new WeightSyncError(
        `${this.#where}: bucket ${index} from sender ${sender} did not come ${lend ? 'lent' : 'packed'}, ` +
          `as this receiver's engine expects: the ranks were given different lend options (${error.message})`,
      );
    });
    try {
      const header = this.#checkHeader(index, sender, received.record);
      if (this.#into && header.unchangedSince === 0)
        this.#landings.set(index, landingsOf(this.#into, header, this.#where));
      if (this.#config.routes.followersOf(this.#group.rank, sender).length > 0) {
        // Copied: a lent record is the sender's memory, given back before the bucket goes on.
        this.#rawHeaders.set(index, (received.record as Uint8Array).slice());
      }
      if (lend && header.unchangedSince === 0) this.#lentViews.set(index, received);
      else await received.release();
      if (source !== sender && carriesPayloadNote(header))
        this.#notes.set(index, await this.#payloadNote(index, sender, source));
      return header;
    } catch (error) {
      letGo(received.release()); // the sender's send completes; this receiver's outcome tells it what went wrong
      throw error;
    }
  }

  /**
   * A payload receive from a relay that failed: the relay broke it on purpose (a send that cannot match,
   * relay.ts), after its failed stream end on the header tag, which says why.
   */
  async #brokenByRelay(error: unknown, sender: number): Promise<never> {
    if (!(error instanceof Error && error.cause instanceof CollectiveMismatchError)) throw error;
    const source = this.#source(sender);
    // A header or note receive posted ahead (phase > 1) takes the stream end, and fails naming the relay.
    for (let wait = this.#headerTagWaits.get(source)?.[0]; wait; wait = this.#headerTagWaits.get(source)?.[0])
      await wait.catch(() => {});
    if (this.#headerTagFailures.has(source)) throw this.#headerTagFailures.get(source);
    const { tags, timeoutMs } = this.#config;
    const raw = await this.#group.recvObject(source, { tag: tags.header, timeoutMs });
    if (isStreamEnd(raw) && this.#decodeEnd(raw, sender).failed) this.#checkEnd(sender, raw);
    throw error;
  }

  /** `receive`, the take of a header from `source`, listed among its unsettled ones until it settles. */
  #headerTagWait<T>(source: number, receive: Promise<T>): Promise<T> {
    const waits = this.#headerTagWaits.get(source) ?? [];
    this.#headerTagWaits.set(source, waits);
    waits.push(receive);
    const settled = () => waits.splice(waits.indexOf(receive), 1);
    receive.then(settled, (error: unknown) => {
      if (!this.#headerTagFailures.has(source)) this.#headerTagFailures.set(source, error);
      settled();
    });
    return receive;
  }

  /** The relay's note behind a bucket's header: where its payload is. A failed relay's stream end comes in its place. */
  async #payloadNote(index: number, sender: number, relay: number): Promise<PayloadNote> {
    const { tags, timeoutMs } = this.#config;
    const receiving = this.#group.recvObject(relay, { tag: tags.header, timeoutMs });
    const raw = await this.#fromRelay(`bucket ${index}`, sender, receiving);
    if (isStreamEnd(raw)) throw this.#endedEarly(index, sender, this.#decodeEnd(raw, sender));
    const note = parsePayloadNote(raw, `relay ${relay}`);
    if ('slot' in note) this.#slotRelays.add(relay);
    return note;
  }

  /** A bucket's header record: decoded, in its place in the stream, and with the digest of the stream so far. */
  #checkHeader(index: number, sender: number, raw: unknown): BucketHeader {
    if (isStreamEnd(raw)) throw this.#endedEarly(index, sender, this.#decodeEnd(raw, sender));
    const header = this.#decodeHeader(raw, `bucket ${index} from sender ${sender}`);
    // Headers are taken in stream order (each waits for the one before), so the digest chains in order.
    const expected = chainDigest(this.#digest, raw as Uint8Array);
    if (header.index !== index || header.digest !== expected) {
      const first = header.entries[0];
      throw new WeightSyncError(
        `${this.#where}: senders iterated different weight streams: bucket ${index} from sender ${sender} ` +
          `(its bucket ${header.index}, first entry '${first?.name ?? '-'}') carries digest ${hex(header.digest)}, ` +
          `but the stream received so far hashes to ${hex(expected)}`,
      );
    }
    if (header.views !== this.#config.lend) {
      throw new WeightSyncError(
        `${this.#where}: bucket ${index} from sender ${sender} is ${header.views ? 'lent' : 'packed'}, ` +
          `but this receiver's engine ${this.#config.lend ? 'lends' : 'packs'}: the ranks were given different lend options`,
      );
    }
    if (header.unchangedSince > 0) this.#checkUnchanged(header, sender);
    this.#digest = expected;
    this.#buckets++;
    this.#tensors += startedTensors(header.entries);
    this.#syncs.set(sender, header.sync);
    if (index === 0) this.#stats = emptyStats(header.sync);
    countBucket(this.#stats, header.payloadBytes, header.unchangedSince > 0);
    return header;
  }

  /** A bucket skipped as unchanged since the sender's sync n can be taken only where the caller holds sync n. */
  #checkUnchanged(header: BucketHeader, sender: number): void {
    const at = `${this.#where}: bucket ${header.index} from sender ${sender} was skipped`;
    if (!this.#config.delta) {
      throw new WeightSyncError(
        `${at} as unchanged (delta mode), but this receiver's engine was not given delta: ` +
          'the ranks were given different delta options',
      );
    }
    const held = this.#holds.get(sender);
    if (held === header.unchangedSince) return;
    throw new WeightSyncError(
      `${at} as unchanged since that sender's sync ${header.unchangedSince}, but this receiver's caller ` +
        `${held === undefined ? 'took no sync of it whole' : `took sync ${held} of it whole, not that one`}: ` +
        "a delta sync cannot be exact here (the receiver engine is newer than the sender's?); " +
        'create new engines on every rank, whose first sync sends every bucket',
    );
  }

  #decodeHeader(raw: unknown, what: string): BucketHeader {
    try {
      return decodeBucketHeader(raw, this.#config.bucketBytes, this.#config.maxTensorBytes);
    } catch (error) {
      throw new WeightSyncHeaderError(`${this.#where}: ${what}: ${messageOf(error)}`);
    }
  }

  #decodeEnd(raw: Uint8Array, sender: number): StreamEnd {
    try {
      return decodeStreamEnd(raw);
    } catch (error) {
      throw new WeightSyncHeaderError(
        `${this.#where}: stream end from sender ${sender}: ${messageOf(error)}`,
      );
    }
  }

  /** A sender's stream end came where its next bucket header was due: it failed, or its stream is shorter. */
  #endedEarly(index: number, sender: number, end: StreamEnd): Error {
    if (end.failed) return this.#endFailed(sender, end.error);
    const previous = this.#sender(index - 1);
    return new WeightSyncError(
      `${this.#where}: senders iterated weight streams of different lengths: sender ${sender}'s stream ended ` +
        `after ${end.buckets} buckets (${end.tensors} tensors), but sender ${previous} sent bucket ${index - 1} ` +
        `as not the last: sender ${sender}'s stream is shorter than sender ${previous}'s`,
    );
  }

  /** A failed stream end's error: its sender's, or through a relay the relay's own, which names it (a relay hands on only ends that did not fail). */
  #endFailed(sender: number, error: string): Error {
    if (this.#source(sender) !== sender) return new WeightSyncError(`${this.#where}: ${error}`);
    return new WeightSyncError(`${this.#where}: sender ${sender} failed: ${error}`);
  }

  async #takePayload(header: BucketHeader): Promise<BucketHeader> {
    const { index, payloadBytes } = header;
    const sender = this.#sender(index);
    if (header.unchangedSince > 0) {
      this.#handOn(header, [], undefined);
      return header;
    }
    if (header.views) {
      const loan = this.#lentViews.get(index)!;
      this.#lentViews.delete(index);
      let chunks: Uint8Array[];
      try {
        chunks = this.#checkViews(header, sender, loan.views);
      } catch (error) {
        letGo(loan.release()); // the sender's send completes; this receiver's outcome tells it what went wrong
        throw error;
      }
      if (this.#reused) {
        // Borrowing: the sender's own tensors, until the caller moves past this bucket.
        this.#loans.set(index, loan.release);
        this.#landedAs(header, chunks);
        return header;
      }
      const own = new Uint8Array(new SharedArrayBuffer(payloadBytes));
      for (const [i, e] of header.entries.entries()) own.set(chunks[i], e.offset);
      this.#landedAs(header, chunksOf(header, own));
      await loan.release();
      return header;
    }
    if (payloadBytes === 0) {
      this.#landedAs(
        header,
        header.entries.map(() => new Uint8Array(0)),
      );
      return header;
    }
    const { tags, timeoutMs } = this.#config;
    const options = { tag: tags.payload, timeoutMs };
    const source = this.#source(sender);
    const relaying = this.#config.routes.followersOf(this.#group.rank, sender).length > 0;
    const memory = relaying ? this.#memoryOf(this.#group.rank) : undefined;
    if (memory) return this.#landInMemory(header, memory);
    const buffer = this.#reused?.(index % 2) ?? new Uint8Array(new SharedArrayBuffer(payloadBytes));
    if (source !== sender) {
      // Each entry straight to its target where `into` gives one.
      const landings = this.#landings.get(index);
      const chunks = header.entries.map(
        (e, i) => landings?.[i]?.bytes ?? buffer.subarray(e.offset, e.offset + e.chunkBytes),
      );
      const note = this.#notes.get(index)!;
      this.#notes.delete(index);
      if ('slot' in note) this.#copyFromRelay(header, source, note.slot, chunks);
      else {
        const receives = chunks
          .filter((c) => c.byteLength > 0)
          .map((c) => this.#group.recv(bytesTensor(c), source, options));
        await this.#fromRelay(`bucket ${index}`, sender, Promise.all(receives)).catch((error: unknown) =>
          this.#brokenByRelay(error, sender),
        );
      }
      this.#landedAs(header, chunks);
      return header;
    }
    if (onOtherNode(this.#group, sender)) {
      const chunks = await this.#receivePieces(header, buffer, this.#landings.get(index));
      this.#landedAs(header, chunks);
      return header;
    }
    const target = bytesTensor(buffer.subarray(0, payloadBytes));
    if (!this.#reused) {
      await this.#group.recv(target, source, options);
      this.#landedAs(header, chunksOf(header, buffer));
      return header;
    }
    // Borrowing: the sender's bucket itself where the group can lend it (no copy), else `target`. The
    // sender reuses that bucket only after every receiver released it, when its caller moved past it.
    const borrowed = await this.#group.recvBorrowed(target, source, options);
    this.#loans.set(index, borrowed.release);
    this.#landedAs(header, chunksOf(header, borrowed.tensor.bytes()));
    return header;
  }

  /**
   * A relay's bucket from the network, into slot index mod 2 of its node memory, where its followers copy it
   * from. Its caller reads it there too, unless it keeps its tensors (neither borrowing nor loading `into`),
   * which get memory of their own.
   */
  async #landInMemory(header: BucketHeader, memory: Uint8Array): Promise<BucketHeader> {
    const { index, payloadBytes } = header;
    const slot = index % 2;
    const landing = slotOf(memory, slot, this.#config);
    const chunks = await this.#receivePieces(header, landing, undefined);
    if (this.#reused) this.#landedAs(header, chunks, slot);
    else {
      const held = new Uint8Array(new SharedArrayBuffer(payloadBytes));
      held.set(landing.subarray(0, payloadBytes));
      this.#landedAs(header, chunksOf(header, held), slot);
    }
    return header;
  }

  /**
   * A bucket from a sender on another node, in pieces (pieces.ts): an entry alone straight to its landing in
   * `into` where it has one, everything else into `base` at its offset; each entry's bytes.
   */
  async #receivePieces(
    header: BucketHeader,
    base: Uint8Array,
    landings: ReadonlyArray<Landing | undefined> | undefined,
  ): Promise<Uint8Array[]> {
    const { tags, timeoutMs } = this.#config;
    const options = { tag: tags.payload, timeoutMs };
    const chunks = chunksOf(header, base);
    const receives = piecesOf(header.entries, header.payloadBytes).map((p) => {
      const landing = isAlone(p) ? landings?.[p.first] : undefined;
      if (landing) chunks[p.first] = landing.bytes;
      const into = landing?.bytes ?? base.subarray(p.start, p.start + p.bytes);
      return this.#group.recv(bytesTensor(into), this.#sender(header.index), options);
    });
    await Promise.all(receives);
    return chunks;
  }

  /** A bucket in slot `slot` of relay `relay`'s node memory, copied entry by entry into `chunks`, then acknowledged. */
  #copyFromRelay(header: BucketHeader, relay: number, slot: number, chunks: readonly Uint8Array[]): void {
    const { index } = header;
    const memory = this.#memoryOf(relay);
    if (!memory)
      throw new WeightSyncError(
        `${this.#where}: relay ${relay} handed bucket ${index} on in its node memory, which this rank cannot map`,
      );
    const from = slotOf(memory, slot, this.#config);
    for (const [i, e] of header.entries.entries())
      chunks[i].set(from.subarray(e.offset, e.offset + e.chunkBytes));
    const { tags, timeoutMs } = this.#config;
    const handed: Handed = { bucket: index };
    // The relay reads it before it hands the next bucket on; a relay that failed tells this rank on the header tag.
    letGo(this.#group.sendObject(handed, relay, { tag: tags.outcome, timeoutMs }));
  }

  /**
   * Bucket `header.index` landed in `chunks` (one per entry): the caller gets it from there, and a relay hands
   * it on (from slot `slot` of its node memory, where it landed there).
   */
  #landedAs(header: BucketHeader, chunks: Uint8Array[], slot?: number): void {
    this.#landed.set(header.index, chunks);
    this.#handOn(header, chunks, slot);
  }

  /**
   * Relaying this bucket's sender: hands the bucket on as it landed here (relay.ts): from its slot of this
   * relay's node memory; else lent, its views; else packed, one message per non-empty entry, so that each
   * lands where the follower wants it.
   */
  #handOn(header: BucketHeader, chunks: readonly Uint8Array[], slot: number | undefined): void {
    const followers = this.#config.routes.followersOf(this.#group.rank, this.#sender(header.index));
    if (followers.length === 0) return;
    const raw = this.#rawHeaders.get(header.index)!;
    this.#rawHeaders.delete(header.index);
    const relayed: RelayedContent =
      slot !== undefined
        ? { slot }
        : header.views
          ? { content: { views: chunks.map(bytesTensor) } }
          : {
              content: { payloads: () => chunks.filter((c) => c.byteLength > 0) },
              note: carriesPayloadNote(header) ? { entries: true } : undefined,
            };
    this.#forwarded[header.index] = this.#relay.forward(header.index, followers, raw, relayed);
  }

  /** A lent bucket must hold one view per entry, each of the entry's size; a mismatch is the sender's fault. */
  #checkViews(header: BucketHeader, sender: number, views: readonly Tensor[]): Uint8Array[] {
    const { entries, index } = header;
    const at = `${this.#where}: bucket ${index} from sender ${sender}`;
    if (views.length !== entries.length) {
      throw new WeightSyncError(`${at} lent ${views.length} views for its ${entries.length} entries`);
    }
    return views.map((v, i) => {
      const e = entries[i];
      if (v.nbytes !== e.chunkBytes) {
        throw new WeightSyncError(
          `${at}: entry ${i} ('${e.name}') arrived as ${v.nbytes} bytes, but its header says ${e.chunkBytes}`,
        );
      }
      return v.bytes();
    });
  }

  /**
   * Reads every sender's stream end, compares it with what arrived, and tells every sender the outcome;
   * `held`: the caller took every tensor of the sync.
   */
  async #agree(held: boolean): Promise<void> {
    const { senders, tags, timeoutMs, lend } = this.#config;
    // Relaying: the stream ends go on behind every bucket (and a failed forward fails the sync).
    await Promise.all(this.#forwarded);
    const ends = await Promise.all(
      senders.map(async (s) => {
        const receiving = recvRecord(this.#group, lend, this.#source(s), { tag: tags.header, timeoutMs });
        const received = await this.#fromRelay('the stream end', s, receiving);
        // A failed end fails the sync at once: a relay that fails sends one in place of every sender's end.
        if (isStreamEnd(received.record) && this.#decodeEnd(received.record, s).failed) {
          letGo(received.release());
          this.#checkEnd(s, received.record);
        }
        return { s, received };
      }),
    );
    try {
      for (const { s, received } of ends) this.#checkEnd(s, received.record);
      for (const { s, received } of ends) {
        const followers = this.#config.routes.followersOf(this.#group.rank, s);
        if (followers.length > 0) this.#relay.forwardEnd(followers, (received.record as Uint8Array).slice());
      }
    } finally {
      for (const { received } of ends) letGo(received.release());
    }
    if (held) for (const [s, sync] of this.#syncs) this.#holds.set(s, sync);
    else this.#holds.clear();
    this.#outcomeSent = true;
    const outcome = { ok: true, holds: held };
    await Promise.all(
      senders.map((s) => this.#group.sendObject(outcome, s, { tag: tags.outcome, timeoutMs })),
    );
    this.#done(this.#stats);
  }

  /** What sender `s` sent after the stream's last bucket must be its stream end, matching what arrived. */
  #checkEnd(s: number, raw: unknown): void {
    const received = `${this.#buckets} buckets (${this.#tensors} tensors, digest ${hex(this.#digest)})`;
    const last = this.#buckets - 1;
    if (!isStreamEnd(raw)) {
      const first = this.#decodeHeader(raw, `a bucket from sender ${s} after the last`).entries[0];
      throw new WeightSyncError(
        `${this.#where}: senders iterated weight streams of different lengths: sender ${s} sent another bucket ` +
          `(first entry '${first?.name ?? '-'}') after bucket ${last}, which sender ${this.#sender(last)} sent as ` +
          `the last: sender ${s}'s stream is longer than the ${received} received`,
      );
    }
    const end = this.#decodeEnd(raw, s);
    if (end.failed) throw this.#endFailed(s, end.error);
    if (end.buckets === this.#buckets && end.tensors === this.#tensors && end.digest === this.#digest) return;
    const planned = `${end.buckets} buckets (${end.tensors} tensors, digest ${hex(end.digest)})`;
    const longer =
      end.tensors === this.#tensors
        ? ''
        : `: sender ${s}'s stream is ${end.tensors > this.#tensors ? 'longer' : 'shorter'}`;
    throw new WeightSyncError(
      `${this.#where}: senders iterated different weight streams: sender ${s} planned ${planned}, ` +
        `but ${received} arrived${longer}`,
    );
  }

  /** Tells every sender why this receiver stopped (once, and not after its outcome went out), then returns the error. */
  #fail(error: unknown): unknown {
    if (this.#failed) return error;
    this.#failed = true;
    // Lent buckets go back, so their senders' sends complete and they can read the outcome.
    for (const loan of this.#loans.values()) letGo(loan());
    this.#loans.clear();
    for (const taken of this.#lentViews.values()) letGo(taken.release());
    this.#lentViews.clear();
    if (!this.#outcomeSent) {
      const { senders, tags, timeoutMs } = this.#config;
      const outcome = { ok: false, error: messageOf(error) };
      const linger = LINGER_TIMEOUTS * timeoutMs;
      for (const s of senders)
        letGo(this.#group.sendObject(outcome, s, { tag: tags.outcome, timeoutMs: linger }));
      // A relay waiting for this rank's acknowledgement of a bucket in its node memory learns why it never comes.
      const handed: Handed = { failed: messageOf(error) };
      for (const relay of this.#slotRelays)
        letGo(this.#group.sendObject(handed, relay, { tag: tags.outcome, timeoutMs: linger }));
      // A sender may be blocked sending this receiver a header or payload it will never take. A receive
      // that cannot match (p2p size mismatch fails both ends) breaks that send at once; the sender then
      // reads the outcome above. Where no send comes, the receive just times out.
      const nothing = Tensor.empty([0], 'uint8');
      for (const source of new Set(senders.map((s) => this.#source(s)))) {
        for (const tag of [tags.header, tags.payload])
          letGo(this.#group.recv(nothing, source, { tag, timeoutMs }));
      }
    }
    this.#relay.fail(error);
    return error;
  }
}

/** Each entry's bytes in a packed payload. */
function chunksOf(header: BucketHeader, payload: Uint8Array): Uint8Array[] {
  return header.entries.map((e) => payload.subarray(e.offset, e.offset + e.chunkBytes));
}
