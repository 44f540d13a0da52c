/**
 * The sending side of a sync. Every sender plans the whole stream (so all
 * agree on buckets and on the running digest) but packs and sends only the
 * buckets b with b mod S equal to its place among the senders. It has two
 * bucket buffers: it packs the next bucket into one while the other is in
 * flight, and reuses a buffer only after every receiver has finished reading
 * it (the p2p send resolves then).
 */
import { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import { DIGEST_SEED, stampDigest } from './digest.ts';
import { WeightSyncError } from './errors.ts';
import { encodeBucketHeader } from './header.ts';
import type { WeightSyncConfig } from './options.ts';
import { type PlannedBucket, planBuckets, type WeightStream } from './plan.ts';
import { type FinalReport, messageOf, parseOutcome, quiet } from './protocol.ts';

/** How long a failed sender looks for a receiver's error report that would explain its failure. */
const PROBE_MS = 1000;

export class BucketSender {
  readonly #group: ThreadGroup;
  readonly #config: WeightSyncConfig;
  /** This rank's place among the senders: it sends buckets place, place + S, place + 2S, … */
  readonly #place: number;
  #buffers: Uint8Array[] | undefined;

  constructor(group: ThreadGroup, config: WeightSyncConfig) {
    this.#group = group;
    this.#config = config;
    this.#place = config.senders.indexOf(group.rank);
  }

  async send(weights: WeightStream, where: string): Promise<void> {
    const { bucketBytes, senders } = this.#config;
    // Allocated on first use and kept: consecutive syncs reuse the same two buffers.
    this.#buffers ??= [0, 1].map(() => new Uint8Array(new SharedArrayBuffer(bucketBytes)));
    const inFlight: Promise<void>[] = [];
    let digest = DIGEST_SEED;
    let buckets = 0;
    let mine = 0;
    for await (const bucket of planBuckets(weights, bucketBytes, where)) {
      const header = encodeBucketHeader({ ...bucket, entries: bucket.chunks, digest: 0 });
      digest = stampDigest(digest, header);
      buckets++;
      if (bucket.index % senders.length !== this.#place) continue;
      const slot = mine++ % 2;
      await this.#settled(inFlight[slot], where);
      const buffer = this.#buffers[slot];
      pack(bucket, buffer);
      inFlight[slot] = quiet(this.#transfer(bucket, header, buffer, where));
    }
    for (const transfer of inFlight) await this.#settled(transfer, where);
    await this.#agree(buckets, digest, where);
  }

  /** Header to every receiver, then, once all took it, the used part of the buffer. */
  async #transfer(
    bucket: PlannedBucket,
    header: Uint8Array,
    buffer: Uint8Array,
    where: string,
  ): Promise<void> {
    const { receivers, tags, timeoutMs } = this.#config;
    try {
      await Promise.all(
        receivers.map((r) => this.#group.sendObject(header, r, { tag: tags.header, timeoutMs })),
      );
      if (bucket.payloadBytes === 0) return;
      const payload = Tensor.fromBuffer(buffer.buffer, buffer.byteOffset, [bucket.payloadBytes], 'uint8');
      await Promise.all(receivers.map((r) => this.#group.send(payload, r, { tag: tags.payload, timeoutMs })));
    } catch (error) {
      throw new WeightSyncError(`${where}: bucket ${bucket.index}: ${messageOf(error)}`, { cause: error });
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
      const outcomes = await Promise.all(
        receivers.map((r) => this.#outcome(r, probeMs).catch(() => undefined)),
      );
      const reason = outcomes.find((o) => o !== undefined);
      if (reason === undefined) throw error;
      throw new WeightSyncError(`${where}: ${reason}`, { cause: error });
    }
  }

  /** A receiver's outcome: undefined when it is ok, else its error. */
  async #outcome(receiver: number, timeoutMs: number): Promise<string | undefined> {
    const value = await this.#group.recvObject(receiver, { tag: this.#config.tags.outcome, timeoutMs });
    const outcome = parseOutcome(value, `receiver ${receiver}`);
    return outcome.ok ? undefined : `receiver ${receiver} failed: ${outcome.error}`;
  }

  /**
   * Tells every receiver what this sender planned and waits for each one's
   * outcome. The reports are not awaited: a receiver that already failed never
   * takes its report, and its outcome says so.
   */
  async #agree(buckets: number, digest: number, where: string): Promise<void> {
    const { receivers, tags, timeoutMs } = this.#config;
    const report: FinalReport = { buckets, digest };
    for (const r of receivers) quiet(this.#group.sendObject(report, r, { tag: tags.final, timeoutMs }));
    const outcomes = await Promise.all(receivers.map((r) => this.#outcome(r, timeoutMs)));
    const problem = outcomes.find((o) => o !== undefined);
    if (problem !== undefined) throw new WeightSyncError(`${where}: ${problem}`);
  }
}

/** Copies each chunk to its offset; the alignment gaps are zeroed so a payload depends only on the stream. */
function pack(bucket: PlannedBucket, buffer: Uint8Array): void {
  let end = 0;
  for (const c of bucket.chunks) {
    buffer.fill(0, end, c.offset);
    buffer.set(c.tensor.bytes().subarray(c.chunkStart, c.chunkStart + c.chunkBytes), c.offset);
    end = c.offset + c.chunkBytes;
  }
}
