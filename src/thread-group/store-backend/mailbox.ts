/**
 * Mailboxes: point-to-point messages between the ranks of one group that map
 * common memory (thread ranks, or process ranks of one node: mailbox-memory.ts),
 * without the keyed handshake for small ones. Every ordered pair of group
 * ranks has a single-producer single-consumer ring (runtime/byte-ring.ts) in
 * that memory, and every message of every stream
 * (src, dst, tag) goes through it, in order, as one record: a small
 * contiguous host tensor with its bytes inline (MPI's eager protocol, Open
 * MPI's fastboxes), anything else as a marker saying the value waits in the
 * keyed store under the message's key. So the n-th receive of a stream always reads the n-th
 * record, learns dtype and shape before it touches the store, and a sender
 * and receiver that disagree about a message's size still meet.
 *
 * An inline send completes once its receive took the message (as a send
 * through the store does), so a receive that fails on it (a shape mismatch,
 * a receive that failed its own checks) fails the send too, with the
 * receive's words: each pair has a few acknowledgement slots where the
 * receive leaves its verdict. A send that finds them all in use goes through
 * the keyed store instead.
 *
 * A receive whose record has not come is posted (MPI's posted-receive
 * queue): one reader per peer parks on that peer's ring and hands each record
 * that comes to the receive posted for it, as does any receive that reads
 * past it on the way to its own. A record no receive is posted for yet is
 * kept aside (the unexpected queue), at most STASHED_MAX per peer: past that
 * reading stops until a receive takes one, the peer's sends wait for room,
 * and a receive behind them times out saying so, rather than memory growing
 * with what a peer sends. Kept-aside records are mostly markers: the inline
 * ones are at most the acknowledgement slots of the pair.
 *
 * A record, after the ring's 4-byte length word (little-endian):
 *
 *    0  kind u8 (MAIL)      1  dtype code u8      2  ndim u8      3  spare u8
 *    4  tag f64 (tags are any safe integer)      12  message number f64
 *   20  acknowledgement ticket u32 (ACK_TICKET; 0: none)          24  spare u32
 *   28  shape: ndim × f64, then an inline message's payload
 *
 * The fixed part is 28 bytes, so with the length word in front the payload
 * starts 8-byte aligned and is read in place as any dtype.
 */
import type { JobStop } from '../../runtime/abort-word.ts';
import { ByteRing, NO_RECORD, RING_HEAD, RING_SLEEPERS, RING_TAIL } from '../../runtime/byte-ring.ts';
import { CollectiveMismatchError, CommTimeoutError } from '../../runtime/errors.ts';
import { failureError } from '../../runtime/store-bookkeeping.ts';
import { decodeText, encodeBounded, MAX_DIMS, MAX_ERROR_BYTES } from '../../runtime/store-limits.ts';
import { deadlineAfter, pollUntil, waitBriefly, waitForWord } from '../../runtime/wait.ts';
import { type DType, dtypeCode, dtypeFromCode } from '../../tensor/dtype.ts';
import { copyBytes } from '../../tensor/shared-copy.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { type CallInfo, CallMismatchError, COMPLETED, type GroupView } from '../backend.ts';
import { ranksText } from './call-failure.ts';
import {
  ACK_HEADER_BYTES,
  ackSlotOffset,
  ackSlots,
  type MailboxMemory,
  mailboxRingBytes,
  pairBytes,
} from './mailbox-memory.ts';
import { waitMonitored, watchMonitored } from './monitored-wait.ts';

/** What receiveInto did: landed the message, saw nothing come within its brief wait, or left it to receive. */
export const RECEIVED_INTO = { landed: 1, notCome: 2, otherwise: 3 } as const;
export type ReceivedInto = (typeof RECEIVED_INTO)[keyof typeof RECEIVED_INTO];

/** What a record carries: the message's bytes, or word that they wait in the keyed store. */
export const MAIL = { inline: 1, stored: 2 } as const;
export type MailKind = (typeof MAIL)[keyof typeof MAIL];

/** Records of other streams a rank keeps aside per peer before it stops reading that peer's ring. */
export const STASHED_MAX = 1024;
/** Where a record's fields are (the layout in the file comment). */
const KIND_AT = 0;
const DTYPE_AT = 1;
const NDIM_AT = 2;
const TAG_AT = 4;
const MESSAGE_AT = 12;
const TICKET_AT = 20;
const SHAPE_AT = 28;
/** What a marker's header says of its value: nothing (the keyed store carries and checks it). */
const NO_SHAPE: readonly number[] = [];
const MARKER_DTYPE: DType = 'uint8';
/** A peer's reader parks on its ring in slices of this, looking whether receives are still posted. */
const READER_SLICE_MS = 1_000;

export interface MailRecord {
  kind: MailKind;
  /** The acknowledgement ticket the sender waits on (see ACK_TICKET), 0 for none. */
  ack: number;
  dtype: DType;
  shape: number[];
  /** Inline messages: the payload, readable only while the consumer that was handed it runs. */
  bytes: Uint8Array | undefined;
}

/** A receive waiting for its record: what takes it, and what ends the wait (a value, or an error). */
interface Posted {
  consume: (record: MailRecord) => unknown;
  settle: (value: unknown, error: unknown) => void;
}

/** The key of message `message` of a stream with `tag` (the stream's peer is the stash's). */
function streamKey(tag: number, message: number): string {
  return `${tag}:${message}`;
}

/** An acknowledgement slot's words: its state, text length and sleepers (see wait.ts's wake); then the receive's error text. */
const ACK = { state: 0, textLength: 1, sleepers: 2 } as const;
/**
 * A slot's state word holds the answer to its latest use: that use's number
 * (its generation) times 4 plus the verdict, which the receive stores in one
 * write. The sender, knowing which use it waits for, needs no write of its
 * own before it sends (the word's line stays where the receive left it).
 */
const ACK_STATE = { received: 1, mismatch: 2, failed: 3 } as const;
/**
 * A record's acknowledgement ticket: the use's generation times 16 plus its
 * slot + 1 (0: no acknowledgement). Generations count 1..GENERATIONS - 1 and
 * start over: a slot has one use in flight at a time.
 */
const ACK_TICKET = { slotBits: 4, slotMask: 15 } as const;
const GENERATIONS = 1 << 27;
/** A ring's next record word holds its length once it is there (ByteRing.nextWord). */
const published = (word: number) => word !== 0;

function headerBytes(ndim: number): number {
  return SHAPE_AT + 8 * ndim;
}

/**
 * The most bytes a message carries inline in a group of `size`: a quarter
 * ring (its record, with the header, stays within the half ring a record may take).
 */
export function inlinePayloadMax(size: number): number {
  return mailboxRingBytes(size) / 4;
}

/** The bytes of one ordered pair's mailbox: its ring, and the words of its acknowledgement slots. */
interface Pair {
  ring: ByteRing;
  words: Int32Array;
  bytes: Uint8Array;
}

export class Mailbox {
  readonly #memory: MailboxMemory;
  readonly #group: GroupView;
  readonly #abort: JobStop | undefined;
  /** Per peer, the acknowledgement slots of this rank's sends to it that are free. */
  readonly #freeAcks: number[][];
  /** Per peer and slot, the generation of its latest use (see ACK_STATE). */
  readonly #ackUses: Int32Array;
  /** The generation a synchronous wait on a slot looks for (waits one at a time, so one field serves). */
  #awaitedUse = 0;
  readonly #answered = (word: number) => word >>> 2 === this.#awaitedUse;
  /** Per peer, the pair this rank writes to it (once the peer made it), and the pair it reads from it. */
  readonly #outPairs: (Pair | undefined)[];
  readonly #inPairs: (Pair | undefined)[];
  /** Per peer, the record writes still waiting for room: later ones queue behind them, in order. */
  readonly #posting: (Promise<void> | undefined)[];
  /** Per peer, the records read on the way to others that no receive took yet. */
  readonly #stash: Map<string, MailRecord>[];
  /** Per peer, the receives waiting for their record, and whether a reader waits on the ring for them. */
  readonly #posted: Map<string, Posted>[];
  readonly #reading: boolean[];

  constructor(memory: MailboxMemory, group: GroupView) {
    this.#memory = memory;
    this.#group = group;
    this.#abort = memory.abort;
    const slots = ackSlots(group.size);
    this.#freeAcks = Array.from({ length: group.size }, () => Array.from({ length: slots }, (_, i) => i));
    this.#ackUses = new Int32Array(group.size * slots);
    this.#outPairs = new Array(group.size).fill(undefined);
    this.#inPairs = new Array(group.size).fill(undefined);
    this.#posting = new Array(group.size).fill(undefined);
    this.#stash = Array.from({ length: group.size }, () => new Map());
    this.#posted = Array.from({ length: group.size }, () => new Map());
    this.#reading = new Array(group.size).fill(false);
  }

  /** Whether `tensor` travels inline: a contiguous host tensor within inlinePayloadMax, of at most MAX_DIMS dimensions. */
  carriesInline(tensor: Tensor): boolean {
    return (
      tensor.device === 'cpu' &&
      tensor.isContiguous() &&
      tensor.nbytes <= inlinePayloadMax(this.#group.size) &&
      tensor.shape.length <= MAX_DIMS
    );
  }

  /**
   * Writes message `message` of stream (this rank → dst, tag): `inline`'s
   * bytes (see carriesInline), or without it a marker saying the value waits
   * in the keyed store. Returns at once when there is room and no earlier
   * write to `dst` waits for some.
   */
  post(
    call: CallInfo,
    dst: number,
    tag: number,
    message: number,
    inline?: Tensor,
    ack = 0,
  ): void | Promise<void> {
    const earlier = this.#posting[dst];
    if (earlier === undefined && this.#tryPost(dst, tag, message, inline, ack)) return;
    const deadline = deadlineAfter(call.timeoutMs);
    const posted = (earlier ?? Promise.resolve()).then(() =>
      this.#postWhenRoom(call, dst, tag, message, inline, ack, deadline),
    );
    const queued: Promise<void> = posted.then(
      () => this.#postingDone(dst, queued),
      () => this.#postingDone(dst, queued),
    );
    this.#posting[dst] = queued;
    return posted;
  }

  #postingDone(dst: number, queued: Promise<void>): void {
    if (this.#posting[dst] === queued) this.#posting[dst] = undefined;
  }

  /**
   * Sends `tensor` inline (see carriesInline) and completes once `dst`
   * received it, failing as that receive failed on it; undefined, with
   * nothing sent, when every acknowledgement slot to `dst` is in use.
   */
  sendInline(
    call: CallInfo,
    dst: number,
    tag: number,
    message: number,
    tensor: Tensor,
  ): Promise<void> | undefined {
    const slot = this.#freeAcks[dst].pop();
    if (slot === undefined) return undefined;
    const ticket = this.#newTicket(dst, slot);
    let posted: void | Promise<void>;
    try {
      posted = this.post(call, dst, tag, message, tensor, ticket);
    } catch (error) {
      this.#freeAcks[dst].push(slot);
      return Promise.reject(error);
    }
    if (posted === undefined) return this.acknowledged(call, dst, ticket);
    return posted.then(
      () => this.acknowledged(call, dst, ticket),
      (error: unknown) => {
        this.#freeAcks[dst].push(slot);
        throw error;
      },
    );
  }

  /**
   * sendInline's first half, for an early send (Backend.sendEarly): writes
   * `tensor` inline (see carriesInline) when an acknowledgement slot is free,
   * no earlier write to `dst` waits and the ring has room now. Returns the
   * message's acknowledgement ticket for `acknowledged`, or 0 with nothing
   * sent.
   */
  sendEarly(dst: number, tag: number, message: number, tensor: Tensor): number {
    if (this.#posting[dst] !== undefined) return 0;
    const slot = this.#freeAcks[dst].pop();
    if (slot === undefined) return 0;
    const ticket = this.#newTicket(dst, slot);
    if (this.#tryPost(dst, tag, message, tensor, ticket)) return ticket;
    this.#freeAcks[dst].push(slot);
    return 0;
  }

  /** The ticket of a new use of acknowledgement slot `slot` to `dst` (see ACK_TICKET). */
  #newTicket(dst: number, slot: number): number {
    const use = dst * ackSlots(this.#group.size) + slot;
    const generation = (this.#ackUses[use] % (GENERATIONS - 1)) + 1;
    this.#ackUses[use] = generation;
    return (generation << ACK_TICKET.slotBits) | (slot + 1);
  }

  /**
   * sendInline's second half: completes once `dst` received the message sent
   * with `ticket` (sendInline's, or sendEarly's), failing as the receive did.
   */
  acknowledged(call: CallInfo, dst: number, ticket: number): Promise<void> {
    const slot = (ticket & ACK_TICKET.slotMask) - 1;
    const generation = ticket >>> ACK_TICKET.slotBits;
    // The message was posted, so its pair is there.
    const { words } = this.#outPair(dst) as Pair;
    const state = this.#ackWord(slot) + ACK.state;
    this.#awaitedUse = generation;
    if (this.#answered(Atomics.load(words, state))) return this.#verdict(dst, slot);
    const deadline = deadlineAfter(call.timeoutMs);
    if (waitBriefly(words, state, this.#answered, deadline, this.#abort)) return this.#verdict(dst, slot);
    // A slot whose wait failed stays taken: its receive may still answer in it.
    return waitMonitored(words, state, (word) => word >>> 2 === generation, {
      group: this.#group,
      call,
      abort: this.#abort,
      deadline,
      sleepers: state - ACK.state + ACK.sleepers,
      spun: true,
      park: this.#memory.park,
      waitingFor: () => `${ranksText(this.#group, [dst])} to read its value`,
      waitedFor: () => [dst],
    }).then(() => this.#verdict(dst, slot));
  }

  #verdict(dst: number, slot: number): Promise<void> {
    const { words, bytes } = this.#outPair(dst) as Pair;
    const at = this.#ackWord(slot);
    const state = words[at + ACK.state] & 3;
    this.#freeAcks[dst].push(slot);
    if (state === ACK_STATE.received) return COMPLETED;
    const textAt = (at << 2) + ACK_HEADER_BYTES;
    const text = decodeText(bytes.subarray(textAt, textAt + words[at + ACK.textLength]));
    const peer = this.#group.ranks[dst];
    const failure = { error: text, mismatch: state === ACK_STATE.mismatch };
    return Promise.reject(failureError(failure, (message) => new CallMismatchError(message, peer), peer));
  }

  /** Receive side: leaves the verdict on a message with ticket `ack` in the acknowledgement slot its sender waits on. */
  #answer(src: number, ack: number, error: unknown): void {
    if (ack === 0) return;
    const { words, bytes } = this.#inPair(src);
    const at = this.#ackWord((ack & ACK_TICKET.slotMask) - 1);
    let state: number = ACK_STATE.received;
    if (error !== undefined) {
      const text = encodeBounded(error instanceof Error ? error.message : String(error), MAX_ERROR_BYTES);
      bytes.set(text, (at << 2) + ACK_HEADER_BYTES);
      words[at + ACK.textLength] = text.length;
      state = error instanceof CollectiveMismatchError ? ACK_STATE.mismatch : ACK_STATE.failed;
    }
    Atomics.store(words, at + ACK.state, ((ack >>> ACK_TICKET.slotBits) << 2) | state);
    this.#memory.wake(words, at + ACK.state, at + ACK.sleepers, src);
  }

  /** Word index, in its pair's words, of acknowledgement slot `slot`. */
  #ackWord(slot: number): number {
    return ackSlotOffset(this.#group.size, slot) >> 2;
  }

  /** Writes the record in place in `dst`'s ring (no staging copy); false when the ring has no room now. */
  #tryPost(dst: number, tag: number, message: number, inline: Tensor | undefined, ack: number): boolean {
    const ring = this.#outPair(dst)?.ring;
    if (ring === undefined) return false;
    const shape = inline?.shape ?? NO_SHAPE;
    const header = headerBytes(shape.length);
    const payloadBytes = inline ? inline.nbytes : 0;
    const at = ring.reserve(header + payloadBytes);
    if (at < 0) return false;
    const h = ring.view;
    h.setUint8(at + KIND_AT, inline ? MAIL.inline : MAIL.stored);
    h.setUint8(at + DTYPE_AT, dtypeCode(inline?.dtype ?? MARKER_DTYPE));
    h.setUint8(at + NDIM_AT, shape.length);
    h.setFloat64(at + TAG_AT, tag, true);
    h.setFloat64(at + MESSAGE_AT, message, true);
    h.setUint32(at + TICKET_AT, ack, true);
    for (let d = 0; d < shape.length; d++) h.setFloat64(at + SHAPE_AT + 8 * d, shape[d], true);
    if (inline) copyBytes(ring.data, at + header, inline.bytes(), 0, payloadBytes);
    ring.publish();
    this.#memory.wake(ring.controlWords, RING_HEAD, RING_SLEEPERS, dst);
    return true;
  }

  async #postWhenRoom(
    call: CallInfo,
    dst: number,
    tag: number,
    message: number,
    inline: Tensor | undefined,
    ack: number,
    deadline: number,
  ): Promise<void> {
    const describe = () => `${ranksText(this.#group, [dst])} to make its mailbox`;
    const { ring } =
      this.#outPair(dst) ??
      (await pollUntil(() => this.#outPair(dst), { deadline, abort: this.#abort, describe }));
    const words = ring.controlWords;
    for (;;) {
      ring.markBlocked();
      const tail = Atomics.load(words, RING_TAIL);
      if (this.#tryPost(dst, tag, message, inline, ack)) return;
      await waitMonitored(words, RING_TAIL, (value) => value !== tail, {
        group: this.#group,
        call,
        abort: this.#abort,
        deadline,
        park: this.#memory.park,
        waitingFor: () =>
          `${ranksText(this.#group, [dst])} to take this rank's earlier messages: its mailbox from this rank is full`,
        waitedFor: () => [dst],
      });
    }
  }

  /**
   * Hands message `message` of stream (src → this rank, tag) to `consume`,
   * which must take what it needs before it returns (an inline payload is
   * read in place); without a promise when the record is there within the
   * brief wait.
   */
  receive<T>(
    call: CallInfo,
    src: number,
    tag: number,
    message: number,
    consume: (record: MailRecord) => T,
    waited = false,
  ): T | Promise<T> {
    const found = this.#take(src, tag, message, consume);
    if (found !== undefined) return found.value;
    const deadline = deadlineAfter(call.timeoutMs);
    const ring = this.#inRing(src);
    // `waited`: receiveInto's brief wait just saw nothing come; a second one would only delay the park.
    if (!waited && waitBriefly(ring.records, ring.nextWord, published, deadline, this.#abort)) {
      const soon = this.#take(src, tag, message, consume);
      if (soon !== undefined) return soon.value;
    }
    return this.#awaitRecord(call, src, streamKey(tag, message), consume, deadline);
  }

  /**
   * recv's fast path: when the next record from `src` (within the brief wait)
   * is message `message` of `tag` with its bytes inline, in `tensor`'s layout,
   * copies them into `tensor`, answers its sender and returns LANDED, making
   * no object. Anything else (no record yet, records kept aside, another
   * stream's record first, a marker, another layout) takes nothing, for
   * `receive` to handle and to word any failure: NOT_COME when the brief
   * wait saw nothing come (so `receive` need not wait briefly again),
   * OTHERWISE for the rest.
   */
  receiveInto(call: CallInfo, src: number, tag: number, message: number, tensor: Tensor): ReceivedInto {
    if (this.#stash[src].size > 0 || tensor.device !== 'cpu') return RECEIVED_INTO.otherwise;
    const ring = this.#inRing(src);
    let at = ring.peekOffset();
    if (at === NO_RECORD) {
      if (!waitBriefly(ring.records, ring.nextWord, published, deadlineAfter(call.timeoutMs), this.#abort)) {
        return RECEIVED_INTO.notCome;
      }
      at = ring.peekOffset();
    }
    if (at < 0) return RECEIVED_INTO.otherwise;
    const view = ring.view;
    const shape = tensor.shape;
    const ndim = shape.length;
    if (
      view.getUint8(at + KIND_AT) !== MAIL.inline ||
      view.getFloat64(at + MESSAGE_AT, true) !== message ||
      view.getFloat64(at + TAG_AT, true) !== tag ||
      view.getUint8(at + DTYPE_AT) !== dtypeCode(tensor.dtype) ||
      view.getUint8(at + NDIM_AT) !== ndim
    ) {
      return RECEIVED_INTO.otherwise;
    }
    for (let d = 0; d < ndim; d++) {
      if (view.getFloat64(at + SHAPE_AT + 8 * d, true) !== shape[d]) return RECEIVED_INTO.otherwise;
    }
    copyBytes(tensor.bytes(), 0, ring.data, at + headerBytes(ndim), tensor.nbytes);
    this.#answer(src, view.getUint32(at + TICKET_AT, true), undefined);
    this.#free(src, ring);
    return RECEIVED_INTO.landed;
  }

  /**
   * Posts the receive: whichever look at the ring meets its record hands it
   * over (this peer's reader, or another receive on its way to its own).
   */
  #awaitRecord<T>(
    call: CallInfo,
    src: number,
    key: string,
    consume: (record: MailRecord) => T,
    deadline: number,
  ): Promise<T> {
    const posted = this.#posted[src];
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const stopWatch = watchMonitored(
        {
          group: this.#group,
          call,
          abort: this.#abort,
          deadline,
          waitingFor: () => this.#waitingFor(src),
          waitedFor: () => [src],
        },
        () => {
          this.#lookOnce(src);
          return done;
        },
        (error) => {
          posted.delete(key);
          this.#wakeReader(src);
          reject(error);
        },
      );
      posted.set(key, {
        consume,
        settle: (value, error) => {
          done = true;
          stopWatch();
          if (error === undefined) resolve(value as T);
          else reject(error);
        },
      });
      void this.#read(src);
    });
  }

  /**
   * While receives from `src` are posted, one reader parks on its ring's
   * head and hands each record that comes to its receive (or keeps it
   * aside); a failure to read fails them all.
   */
  async #read(src: number): Promise<void> {
    if (this.#reading[src]) return;
    this.#reading[src] = true;
    const posted = this.#posted[src];
    const ring = this.#inRing(src);
    const words = ring.controlWords;
    const describe = () => `the mailbox from ${ranksText(this.#group, [src])}`;
    try {
      while (posted.size > 0) {
        const head = Atomics.load(words, RING_HEAD);
        this.#look(src);
        if (posted.size === 0) break;
        try {
          await waitForWord(words, RING_HEAD, (value) => value !== head || posted.size === 0, {
            deadline: deadlineAfter(READER_SLICE_MS),
            abort: this.#abort,
            sleepers: RING_SLEEPERS,
            park: this.#memory.park,
            describe,
          });
        } catch (error) {
          if (!(error instanceof CommTimeoutError)) throw error;
        }
      }
    } catch (error) {
      this.#failPosted(src, error);
    } finally {
      this.#reading[src] = false;
    }
  }

  /** Wakes `src`'s reader once no receive is posted any more, so it stops now rather than at its next slice. */
  #wakeReader(src: number): void {
    if (this.#posted[src].size === 0)
      this.#memory.notify(this.#inRing(src).controlWords, RING_HEAD, this.#group.rank);
  }

  /** Whom a receive waits for, in the keyed store's words, and what this rank holds of that peer's already. */
  #waitingFor(src: number): string {
    const held = this.#stash[src].size;
    if (held === 0) return ranksText(this.#group, [src]);
    const full = held >= STASHED_MAX ? ': the most it holds, so it reads no more from that rank' : '';
    return `${ranksText(this.#group, [src])} (this rank holds ${held} earlier messages from it that no receive took yet${full})`;
  }

  /** Whether message `message` of stream (src → this rank, tag) has come (it stays to be received). */
  has(src: number, tag: number, message: number): boolean {
    return this.#stash[src].has(streamKey(tag, message)) || this.#look(src, tag, message);
  }

  /** The record of (src, tag, message), handed to `consume` and then gone; undefined when it has not come. */
  #take<T>(
    src: number,
    tag: number,
    message: number,
    consume: (record: MailRecord) => T,
  ): { value: T } | undefined {
    const stash = this.#stash[src];
    if (stash.size > 0) {
      const key = streamKey(tag, message);
      const kept = stash.get(key);
      if (kept !== undefined) {
        const wasFull = stash.size >= STASHED_MAX;
        stash.delete(key);
        const value = this.#hand(src, kept, consume);
        // Room again: records behind the full stash may be what posted receives wait for.
        if (wasFull) this.#lookOnce(src);
        return { value };
      }
    }
    if (!this.#look(src, tag, message)) return undefined;
    const ring = this.#inRing(src);
    try {
      return { value: this.#hand(src, decode(ring.peek() as Uint8Array), consume) };
    } finally {
      this.#free(src, ring);
    }
  }

  /** `consume(record)`, its verdict left for the sender where it waits for one. */
  #hand<T>(src: number, record: MailRecord, consume: (record: MailRecord) => T): T {
    try {
      const value = consume(record);
      this.#answer(src, record.ack, undefined);
      return value;
    } catch (error) {
      this.#answer(src, record.ack, error);
      throw error;
    }
  }

  /** #look for no record in particular, from a path that cannot fail for it: its failure goes to the posted receives. */
  #lookOnce(src: number): void {
    try {
      this.#look(src);
    } catch (error) {
      this.#failPosted(src, error);
    }
  }

  /** Ends every receive posted for `src` with `error` (its ring could not be read). */
  #failPosted(src: number, error: unknown): void {
    const posted = this.#posted[src];
    for (const receive of posted.values()) receive.settle(undefined, error);
    posted.clear();
  }

  /**
   * Reads `src`'s ring until the record of (tag, message), left in place
   * (true), or until it is empty or the stash full (false). Each record on
   * the way goes to the receive posted for it, or into the stash.
   */
  #look(src: number, tag?: number, message?: number): boolean {
    const stash = this.#stash[src];
    const posted = this.#posted[src];
    const ring = this.#inRing(src);
    for (;;) {
      const body = ring.peek();
      if (body === undefined) return false;
      if (typeof body === 'number') {
        // The ring is tensorcomm's own memory, which no user code reaches: only a bug breaks a record.
        throw new Error(
          `mailbox from ${ranksText(this.#group, [src])}: a record of ${body} bytes cannot be one (memory overwritten)`,
        );
      }
      const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
      const recordTag = view.getFloat64(TAG_AT, true);
      const recordMessage = view.getFloat64(MESSAGE_AT, true);
      if (recordTag === tag && recordMessage === message) return true;
      const key = streamKey(recordTag, recordMessage);
      const receive = posted.get(key);
      if (receive !== undefined) {
        posted.delete(key);
        this.#deliver(src, ring, decode(body), receive);
        continue;
      }
      if (stash.size >= STASHED_MAX) return false;
      const record = decode(body);
      stash.set(key, { ...record, bytes: record.bytes?.slice() });
      this.#free(src, ring);
    }
  }

  /** Hands the ring's next record to the posted receive it is for, and frees it. */
  #deliver(src: number, ring: ByteRing, record: MailRecord, receive: Posted): void {
    try {
      receive.settle(this.#hand(src, record, receive.consume), undefined);
    } catch (error) {
      receive.settle(undefined, error);
    } finally {
      this.#free(src, ring);
      this.#wakeReader(src);
    }
  }

  /** Releases the record read from `src`'s ring, and tells `src` of the room where it waits for some. */
  #free(src: number, ring: ByteRing): void {
    ring.release();
    if (ring.takeBlocked()) this.#memory.notify(ring.controlWords, RING_TAIL, src);
  }

  /** The pair this rank writes to `dst`; undefined while `dst` has not made it. */
  #outPair(dst: number): Pair | undefined {
    this.#outPairs[dst] ??= this.#pair(this.#group.rank, dst);
    return this.#outPairs[dst];
  }

  #inPair(src: number): Pair {
    // This rank's own inbox, made with the mailbox.
    this.#inPairs[src] ??= this.#pair(src, this.#group.rank) as Pair;
    return this.#inPairs[src];
  }

  #inRing(src: number): ByteRing {
    return this.#inPair(src).ring;
  }

  #pair(src: number, dst: number): Pair | undefined {
    const at = this.#memory.pair(src, dst);
    if (at === undefined) return undefined;
    const size = this.#group.size;
    const { buffer, byteOffset } = at;
    const bytes = pairBytes(size);
    return {
      ring: new ByteRing(buffer, byteOffset, mailboxRingBytes(size)),
      words: new Int32Array(buffer, byteOffset, bytes >> 2),
      bytes: new Uint8Array(buffer, byteOffset, bytes),
    };
  }
}

function decode(body: Uint8Array): MailRecord {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const kind = view.getUint8(KIND_AT) as MailKind;
  const ndim = view.getUint8(NDIM_AT);
  const shape = new Array<number>(ndim);
  for (let d = 0; d < ndim; d++) shape[d] = view.getFloat64(SHAPE_AT + 8 * d, true);
  return {
    kind,
    ack: view.getUint32(TICKET_AT, true),
    dtype: dtypeFromCode(view.getUint8(DTYPE_AT)),
    shape,
    bytes: kind === MAIL.inline ? body.subarray(headerBytes(ndim)) : undefined,
  };
}
