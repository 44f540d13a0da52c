/**
 * The sending side of a sync. Every sender plans the whole stream (so all
 * agree on buckets and on the running digest) but packs and sends only the
 * buckets b with b mod S equal to its place among the senders. It has two
 * bucket buffers: it packs the next bucket into one while the other is in
 * flight, and reuses a buffer only after every receiver has finished reading
 * it (the p2p send resolves then). Where the group lends views it packs
 * nothing: a bucket's entries go out as views on the tensors themselves,
 * behind its header in one message, and still at most two of its buckets are
 * in flight. Its header stream ends with a stream end:
 * what it planned, or the error its weights iterator (or packing) threw.
 * Across nodes it sends only to the receivers on its node and to one relay
 * per other node (routes.ts); every receiver still answers it. To another
 * node a bucket goes in pieces (pieces.ts): a large entry straight from its
 * tensor, only the small ones packed; a sender with no receiver on its own
 * node packs nothing else.
 *
 * In predict mode each bucket's transfer is a task of the sync's own (a fork
 * of its layer call, predict/layer-clock.ts): its waits move only its clock,
 * and the sync's clock catches up with it where the sender waits for it, so
 * a bucket is sent when the one whose buffer it reuses was done, however the
 * transfers in flight beside it ran.
 */
import { callsIn, type LayerCall } from '../predict/layer-clock.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import { type BucketContent, bytesTensor, deliverBucket, type PayloadTurn } from './deliver.ts';
import { countBucket, emptyStats, SenderDelta, type WeightSyncStats } from './delta.ts';
import { DIGEST_SEED, stampDigest } from './digest.ts';
import { WeightSyncError } from './errors.ts';
import { encodeBucketHeader, setUnchangedSince, startedTensors } from './header.ts';
import type { WeightSyncConfig } from './options.ts';
import { isAlone, type Piece, piecesOf } from './pieces.ts';
import { type PlannedBucket, type PlannedChunk, planBuckets, type WeightStream } from './plan.ts';
import { LINGER_TIMEOUTS, letGo, messageOf, type Outcome, parseOutcome, quiet } from './protocol.ts';
import { sendRecord } from './record.ts';
import { onOtherNode } from './routes.ts';
import { encodeStreamEnd, type StreamEnd } from './stream-end.ts';

/** How long a failed sender looks for a receiver's error report that would explain its failure. */
const PROBE_MS = 1000;

export class BucketSender {
  /** The group, its calls made in the running sync's layer call. */
  readonly #group: ThreadGroup;
  readonly #plainGroup: ThreadGroup;
  /** The running sync's layer call. */
  readonly #layer: () => LayerCall;
  readonly #config: WeightSyncConfig;
  /** This rank's place among the senders: it sends buckets place, place + S, place + 2S, … */
  readonly #place: number;
  /** The receivers this sender sends to: across nodes, the others take its buckets from a relay (routes.ts). */
  readonly #targets: readonly number[];
  /** Whether some of them are on this sender's own node (each bucket whole, packed), and some on another (in pieces). */
  readonly #nearTargets: boolean;
  readonly #farTargets: boolean;
  readonly #delta: SenderDelta;
  #buffers: Uint8Array[] | undefined;

  constructor(group: ThreadGroup, config: WeightSyncConfig, layer: () => LayerCall) {
    this.#plainGroup = group;
    this.#group = callsIn(group, layer);
    this.#layer = layer;
    this.#config = config;
    this.#place = config.senders.indexOf(group.rank);
    this.#targets = config.routes.targetsOf(group.rank);
    this.#nearTargets = this.#targets.some((r) => !onOtherNode(group, r));
    this.#farTargets = this.#targets.some((r) => onOtherNode(group, r));
    this.#delta = new SenderDelta(config.delta);
  }

  async send(weights: WeightStream, where: string): Promise<WeightSyncStats> {
    const { bucketBytes, senders, lend } = this.#config;
    // Allocated on first use and kept: consecutive syncs reuse the same two buffers.
    if (!lend) this.#buffers ??= [0, 1].map(() => new Uint8Array(new SharedArrayBuffer(bucketBytes)));
    const inFlight: Promise<void>[] = [];
    let digest = DIGEST_SEED;
    let buckets = 0;
    let mine = 0;
    let tensors = 0;
    let payloadTurn = Promise.resolve();
    const sync = this.#delta.begin();
    const stats = emptyStats(sync);
    const plan = planBuckets(weights, bucketBytes, where);
    try {
      for (;;) {
        const next = await this.#ownStep(() => plan.next());
        if (next.done) break;
        const bucket = next.value;
        const header = encodeBucketHeader({
          ...bucket,
          entries: bucket.chunks,
          sync,
          digest: 0,
          unchangedSince: 0,
          views: lend,
        });
        digest = stampDigest(digest, header);
        buckets++;
        tensors += startedTensors(bucket.chunks);
        if (bucket.index % senders.length !== this.#place) continue;
        const since = await this.#ownStep(() => this.#delta.unchangedSince(bucket, header));
        setUnchangedSince(header, since);
        countBucket(stats, bucket.payloadBytes, since > 0);
        const slot = mine++ % 2;
        await this.#settled(inFlight[slot], where);
        // A skipped bucket is its header alone: no payload, nothing packed.
        const buffer = since > 0 ? undefined : this.#buffers?.[slot];
        const content: BucketContent =
          since > 0 && !lend
            ? { payloads: () => [] }
            : buffer
              ? await this.#ownStep(() => this.#packed(bucket, buffer))
              : { views: since > 0 ? [] : bucket.chunks.map((c) => bytesTensor(chunkBytes(c))) };
        const turn: PayloadTurn = { after: payloadTurn, issued: () => {} };
        payloadTurn = new Promise((resolve) => (turn.issued = resolve));
        inFlight[slot] = quiet(this.#transfer(bucket.index, header, content, turn, where));
      }
    } finally {
      // Leaving early (a failed transfer): close the caller's iterator, as for-await would.
      await plan.return(undefined).catch(() => {});
    }
    // Everything is packed and issued: the end goes out now, behind the last header, so a receiver finds it
    // when it gets there instead of waiting for this sender to see its last buckets released first.
    this.#endStream({ failed: false, buckets, tensors, digest });
    for (const transfer of inFlight) await this.#settled(transfer, where);
    this.#delta.complete(await this.#agree(where));
    return stats;
  }

  /**
   * Runs a step of this sender's own making (the caller's weights iterator,
   * packing). If it throws, every receiver learns it from the header stream,
   * where it waits for this sender's next header; the error is rethrown as is.
   */
  async #ownStep<T>(step: () => T | Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      const name = error instanceof Error ? error.name : 'Error';
      this.#endStream({ failed: true, error: `${name}: ${messageOf(error)}` });
      throw error;
    }
  }

  /**
   * A packed bucket's messages for each receiver, `buffer` packed as they need: whole for one on this node,
   * in pieces for another node (pieces.ts), of which only the runs of small entries are packed.
   */
  #packed(bucket: PlannedBucket, buffer: Uint8Array): BucketContent {
    const { chunks, payloadBytes } = bucket;
    if (payloadBytes === 0) return { payloads: () => [] };
    const whole = [buffer.subarray(0, payloadBytes)];
    if (this.#nearTargets)
      pack(chunks, buffer, { first: 0, end: chunks.length, start: 0, bytes: payloadBytes });
    if (!this.#farTargets) return { payloads: () => whole };
    const pieces = piecesOf(chunks, payloadBytes);
    if (!this.#nearTargets) for (const p of pieces) if (!isAlone(p)) pack(chunks, buffer, p);
    const far = pieces.map((p) =>
      isAlone(p) ? chunkBytes(chunks[p.first]) : buffer.subarray(p.start, p.start + p.bytes),
    );
    return { payloads: (r) => (onOtherNode(this.#plainGroup, r) ? far : whole) };
  }

  /** Closes this sender's header stream to the receivers it sends to (relays hand it on). Not awaited: a receiver that already failed never takes it. */
  #endStream(end: StreamEnd): void {
    const { tags, timeoutMs, lend } = this.#config;
    const record = encodeStreamEnd(end);
    // A failure report must still be there when a receiver reaches it, after the buckets before it.
    const linger = end.failed ? LINGER_TIMEOUTS * timeoutMs : timeoutMs;
    for (const r of this.#targets)
      letGo(sendRecord(this.#group, lend, record, [], r, { tag: tags.header, timeoutMs: linger }));
  }

  /** Bucket `index` to the receivers this sender sends to (deliver.ts), as a task of the sync's own. */
  #transfer(
    index: number,
    header: Uint8Array,
    content: BucketContent,
    turn: PayloadTurn,
    where: string,
  ): Promise<void> {
    const task = this.#layer().fork();
    const group = callsIn(this.#plainGroup, () => task);
    return task.settle(this.#deliver(group, index, header, content, turn, where));
  }

  async #deliver(
    group: ThreadGroup,
    index: number,
    header: Uint8Array,
    content: BucketContent,
    turn: PayloadTurn,
    where: string,
  ): Promise<void> {
    try {
      await deliverBucket(group, this.#config, this.#targets, header, content, turn);
    } catch (error) {
      throw new WeightSyncError(`${where}: bucket ${index}: ${messageOf(error)}`, { cause: error });
    } finally {
      turn.issued();
    }
  }

  /**
   * Waits for an earlier transfer. If it failed, a receiver may have failed
   * first and said why (its outcome): that reason is the better error.
   */
  async #settled(transfer: Promise<void> | undefined, where: string): Promise<void> {
    try {
      await transfer;
    } catch (error) {
      const { receivers, timeoutMs } = this.#config;
      const probeMs = Math.min(PROBE_MS, timeoutMs);
      // A receiver that cannot answer within the probe has no better reason to give.
      const outcomes = await Promise.all(
        receivers.map((r) => this.#failure(r, probeMs).catch(() => undefined)),
      );
      const reason = outcomes.find((o) => o !== undefined);
      if (reason === undefined) throw error;
      throw new WeightSyncError(`${where}: ${reason}`, { cause: error });
    }
  }

  /** A receiver's outcome. */
  async #outcome(receiver: number, timeoutMs: number): Promise<Outcome> {
    const value = await this.#group.recvObject(receiver, { tag: this.#config.tags.outcome, timeoutMs });
    return parseOutcome(value, `receiver ${receiver}`);
  }

  /** A receiver's error, undefined when it is ok. */
  async #failure(receiver: number, timeoutMs: number): Promise<string | undefined> {
    const outcome = await this.#outcome(receiver, timeoutMs);
    return outcome.ok ? undefined : `receiver ${receiver} failed: ${outcome.error}`;
  }

  /**
   * Waits for every receiver's outcome: each compares this sender's stream end with what it received.
   * Resolves to whether every receiver's caller took every tensor (delta.ts).
   */
  async #agree(where: string): Promise<boolean> {
    const { receivers, timeoutMs } = this.#config;
    const outcomes = await Promise.all(receivers.map((r) => this.#outcome(r, timeoutMs)));
    const problem = outcomes.findIndex((o) => !o.ok);
    if (problem >= 0) {
      const o = outcomes[problem] as { ok: false; error: string };
      throw new WeightSyncError(`${where}: receiver ${receivers[problem]} failed: ${o.error}`);
    }
    return outcomes.every((o) => o.ok && o.holds);
  }
}

/** The bytes of a chunk, on the tensor's own memory. */
function chunkBytes(c: PlannedChunk): Uint8Array {
  return c.tensor.bytes().subarray(c.chunkStart, c.chunkStart + c.chunkBytes);
}

/**
 * Copies the chunks of `piece` to their offsets; the alignment gaps between them are zeroed so a payload
 * depends only on the stream.
 */
function pack(chunks: readonly PlannedChunk[], buffer: Uint8Array, piece: Piece): void {
  let end = piece.start;
  for (const c of chunks.slice(piece.first, piece.end)) {
    buffer.fill(0, end, c.offset);
    buffer.set(chunkBytes(c), c.offset);
    end = c.offset + c.chunkBytes;
  }
}
