/**
 * What a rank writes into the other ranks' rings (ring-channels.ts): a
 * peer's inbox is mapped at the first record for it; records that find the
 * ring full wait here in order, the ring marked so that the consumer rings
 * this rank's doorbell once it freed room; and a peer's doorbell is rung once
 * per burst of records, and only while the peer sleeps.
 */
import type { ByteRing } from '../runtime/byte-ring.ts';
import { DoorbellPush } from './doorbell.ts';
import { FileStoreError } from './errors.ts';
import { RingSegment } from './ring-segment.ts';

interface Peer {
  rank: number;
  segment: RingSegment | undefined;
  ring: ByteRing | undefined;
  bell: DoorbellPush;
  /** Records that found the ring full, in order. */
  pending: Array<{ parts: Uint8Array[]; bytes: number }>;
  /** Its store closed (its doorbell has no reader): records for it are dropped. */
  gone: boolean;
}

export class RingOutbox {
  readonly #peers = new Map<number, Peer>();
  /** Peers written to since their doorbells were last rung (see ringDue). */
  readonly #due = new Set<Peer>();
  #ringScheduled = false;

  /** `slotIn(owner)`: the ring of `owner`'s inbox that this rank writes. */
  constructor(
    readonly dir: string,
    readonly rank: number,
    readonly rings: number,
    readonly ringBytes: number,
    readonly slotIn: (owner: number) => number,
  ) {}

  /** Writes a record to `rank`'s ring, or queues it behind records that found no room. */
  write(rank: number, parts: Uint8Array[]): void {
    const peer = this.#peer(rank);
    if (peer.gone) return;
    const bytes = parts.reduce((sum, part) => sum + part.length, 0);
    peer.pending.push({ parts, bytes });
    this.#flush(peer);
  }

  /** Whether `rank` copies large values out of this process's memory (its inbox says so). */
  readsPeers(rank: number): boolean {
    const peer = this.#peer(rank);
    this.#open(peer);
    return peer.segment?.readsPeers() === true;
  }

  /** Writes what waited for room, as far as the rings have it now. */
  flushPending(): void {
    for (const peer of this.#peers.values()) if (peer.pending.length > 0) this.#flush(peer);
  }

  /** Rings `rank`'s doorbell at once, whether it sleeps or not (it has records queued: room was freed). */
  wake(rank: number): void {
    this.#peer(rank).bell.ring();
  }

  #peer(rank: number): Peer {
    let peer = this.#peers.get(rank);
    if (!peer) {
      peer = {
        rank,
        segment: undefined,
        ring: undefined,
        bell: new DoorbellPush(this.dir, rank),
        pending: [],
        gone: false,
      };
      this.#peers.set(rank, peer);
    }
    return peer;
  }

  #open(peer: Peer): void {
    if (peer.ring) return;
    peer.segment = RingSegment.open(this.dir, peer.rank, this.rings, this.ringBytes);
    if (!peer.segment) {
      throw new FileStoreError(
        `rank ${this.rank} cannot reach rank ${peer.rank} through shared memory: its ring file ` +
          `does not exist in ${this.dir} (has its store been created, or closed already?)`,
      );
    }
    peer.ring = peer.segment.rings[this.slotIn(peer.rank)];
  }

  #flush(peer: Peer): void {
    this.#open(peer);
    const ring = peer.ring as ByteRing;
    let wrote = false;
    while (peer.pending.length > 0) {
      const { parts, bytes } = peer.pending[0];
      if (!ring.tryWrite(parts, bytes)) {
        ring.markBlocked();
        // The consumer may have freed room between the failed write and the mark: look once more.
        if (!ring.tryWrite(parts, bytes)) break;
      }
      peer.pending.shift();
      wrote = true;
    }
    if (wrote) this.#scheduleBell(peer);
  }

  /**
   * Rings the peer's doorbell once the current burst of calls is over: a
   * finish and the next value, written one after the other, then wake the
   * peer once. Ringing at each record would wake it for the first, and the
   * scheduler often hands it the core before the second is written.
   */
  #scheduleBell(peer: Peer): void {
    this.#due.add(peer);
    if (this.#ringScheduled) return;
    this.#ringScheduled = true;
    process.nextTick(() => this.ringDue());
  }

  /**
   * Rings the doorbells of the peers written to that sleep, now (before this
   * rank spins or sleeps itself); a peer without a reader closed its store.
   */
  ringDue(): void {
    this.#ringScheduled = false;
    for (const peer of this.#due) {
      if (peer.segment?.isParked() && !peer.bell.ring()) {
        peer.gone = true;
        peer.pending.length = 0;
      }
    }
    this.#due.clear();
  }

  close(): void {
    for (const peer of this.#peers.values()) {
      peer.bell.close();
      peer.segment?.close();
    }
    this.#peers.clear();
    this.#due.clear();
  }
}
