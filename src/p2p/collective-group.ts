/**
 * CollectiveGroup: typed messages between named workers (docs/guides/p2p-and-compression.md).
 * send/recv and sendTensor/recvTensor pair the two workers of a two-worker
 * group; broadcast goes from one named worker to the rest of a group of any
 * size. Each direction between two members is an independent ordered channel
 * (an Outbox on one end, an Inbox on the other), built on first use over the
 * ThreadGroup the manager caches for the members.
 */

import { layerCall } from '../predict/layer-clock.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { trackCall, Work } from '../runtime/work.ts';
import type { Device } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { ThreadGroup } from '../thread-group/thread-group.ts';
import { MessageKind } from './header.ts';
import { Inbox } from './inbox.ts';
import { Outbox, type TransferOptions } from './outbox.ts';
import type { P2PServices } from './services.ts';
import { makeLink } from './transport.ts';

export interface BroadcastOptions extends TransferOptions {
  /** The sending worker's name. */
  src: string;
}

/** What a group needs from its Collective: members by name and rank, and the ThreadGroup, created lazily. */
export interface GroupMembers {
  name: string;
  /** Worker names in sorted order, with their global ranks. */
  workers: readonly string[];
  ranks: readonly number[];
  self: string;
  tagBlock: number;
  threadGroup(): ThreadGroup;
  /** The group carrying GPU tensors from one global rank to another (its own communicator on NCCL). */
  directionGroup(from: number, to: number): ThreadGroup;
  /** This worker's device: GPU tensors it receives land there. */
  device: Device;
  /**
   * The worker's compression and network emulation, shared by its groups.
   * @internal
   */
  services: P2PServices;
}

export class CollectiveGroup {
  readonly #members: GroupMembers;
  readonly #outboxes = new Map<string, Outbox>();
  readonly #inboxes = new Map<string, Inbox>();
  #closed = false;

  constructor(members: GroupMembers) {
    this.#members = members;
  }

  get name(): string {
    return this.#members.name;
  }
  /** Member worker names, sorted. */
  get workers(): readonly string[] {
    return this.#members.workers;
  }

  send(obj: unknown, options?: TransferOptions): Work<void> {
    return this.#pair('send', (peer) => this.#outbox(peer).send(obj, MessageKind.message, 'send', options));
  }

  recv<T = unknown>(options?: TransferOptions): Work<T> {
    return this.#pair(
      'recv',
      (peer) => this.#inbox(peer).recv(MessageKind.message, 'recv', options) as Work<T>,
    );
  }

  /** The fast path: no header, the receiver's buffer (same dtype and shape) says what arrives. */
  sendTensor(tensor: Tensor, options?: TransferOptions): Work<void> {
    return this.#pair('sendTensor', (peer) => this.#outbox(peer).sendTensor(tensor, 'sendTensor', options));
  }

  recvTensor(tensor: Tensor, options?: TransferOptions): Work<Tensor> {
    return this.#pair('recvTensor', (peer) => this.#inbox(peer).recvTensor(tensor, 'recvTensor', options));
  }

  /** `obj` from worker `src` to every other member; resolves to the value everywhere (to `obj` on `src`). */
  broadcast<T = unknown>(obj: T, options: BroadcastOptions): Work<T> {
    const where = `broadcast on collective group "${this.name}"`;
    return this.#guard(where, () => {
      const src = options?.src;
      if (!this.workers.includes(src)) {
        throw new RangeError(
          `${where}: src ${JSON.stringify(src)} is not a member (members: ${this.workers.join(', ')})`,
        );
      }
      if (src !== this.#members.self) {
        return this.#inbox(src).recv(MessageKind.broadcast, 'broadcast', options) as Work<T>;
      }
      const receivers = this.workers.filter((w) => w !== src);
      // The network is charged once for all receivers, on the first copy ready to go (at the broadcast's
      // virtual time in predict mode). The copies are one layer call: the program waits on the broadcast.
      const netem = this.#members.services.netem;
      const layer = layerCall();
      const atS = layer.issuedUs === undefined ? undefined : layer.issuedUs / 1e6;
      let arrivals: number[] | undefined;
      const sends = layer.run(() =>
        receivers.map((w, i) =>
          this.#outbox(w).send(
            obj,
            MessageKind.broadcast,
            'broadcast',
            options,
            netem && ((wireBytes) => (arrivals ??= netem.charge('broadcast', receivers, wireBytes, atS))[i]),
          ),
        ),
      );
      return layer.settle(new Work(Promise.all(sends).then(() => obj)));
    });
  }

  /** Later calls reject; transfers in flight finish or time out on their own. */
  close(): void {
    this.#closed = true;
  }

  /** close(): `using group = …` (Node 24 and later) closes it at the block's end. */
  [Symbol.dispose](): void {
    this.close();
  }

  /** Runs a two-worker call against the other member. */
  #pair<T>(op: string, call: (peer: string) => Work<T>): Work<T> {
    const where = `${op} on collective group "${this.name}"`;
    return this.#guard(where, () => {
      if (this.workers.length !== 2) {
        throw new RangeError(
          `${where}: ${op} pairs two workers, but the group has ${this.workers.length} (${this.workers.join(', ')}); use broadcast`,
        );
      }
      return call(this.workers.find((w) => w !== this.#members.self)!);
    });
  }

  /** Every public call: refused once closed, a throw made a rejected Work, the Work in the rank's ledger. */
  #guard<T>(where: string, call: () => Work<T>): Work<T> {
    let work: Work<T>;
    if (this.#closed)
      work = Work.rejected(new InvalidStateError(`${where}: the worker's collective was closed`));
    else {
      try {
        work = call();
      } catch (error) {
        work = Work.rejected(error);
      }
    }
    return trackCall(work, () => where);
  }

  #outbox(peer: string): Outbox {
    let box = this.#outboxes.get(peer);
    if (!box)
      this.#outboxes.set(peer, (box = new Outbox(this.#link(peer, 'out'), peer, this.#members.services)));
    return box;
  }

  #inbox(peer: string): Inbox {
    let box = this.#inboxes.get(peer);
    if (!box) this.#inboxes.set(peer, (box = new Inbox(this.#link(peer, 'in'), this.#members.services)));
    return box;
  }

  #link(peer: string, direction: 'in' | 'out') {
    const m = this.#members;
    const group = m.threadGroup();
    const peerRank = m.ranks[m.workers.indexOf(peer)];
    const selfRank = m.ranks[m.workers.indexOf(m.self)];
    const [from, to] = direction === 'out' ? [selfRank, peerRank] : [peerRank, selfRank];
    return makeLink(
      { group, gpu: () => m.directionGroup(from, to), device: m.device },
      m.tagBlock,
      peerRank,
      `"${peer}" (rank ${peerRank})`,
    );
  }
}
