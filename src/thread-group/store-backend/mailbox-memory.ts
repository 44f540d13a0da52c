/**
 * Where a group's mailboxes (mailbox.ts) live, and how a wait on them is
 * woken. Every ordered pair of group ranks (src → dst) has its bytes: the
 * ring src writes and dst reads, then the acknowledgement slots dst answers
 * in and src waits on. Thread ranks keep every pair in one region they all
 * map and park on its words (Atomics); process ranks of one node keep the
 * pairs into each rank in a file that rank makes (its inbox, which the
 * others map as they first write to it), and a wait parks its process on
 * the process's doorbell, which the peer that stored the word rings.
 */
import type { JobStop } from '../../runtime/abort-word.ts';
import { RING_CONTROL_BYTES } from '../../runtime/byte-ring.ts';
import { MAX_ERROR_BYTES } from '../../runtime/store-limits.ts';
import {
  type NodeRegion,
  onOneNode,
  type SharedRegion,
  type TensorStore,
} from '../../runtime/tensor-store.ts';
import { wake } from '../../runtime/wait.ts';

/**
 * Ring bytes per ordered pair: the memory grows with the square of the
 * group's size. Groups of a few ranks (tensor-parallel pairs, a node's GPUs)
 * get rings that carry 16 KiB messages inline: a message past the inline
 * size goes through the keyed store, whose handshake costs far more than
 * copying a few KiB.
 */
const FEW_RANKS_RING_BYTES = 64 << 10;
const FEW_RANKS_MAX = 4;
const SMALL_GROUP_RING_BYTES = 8 << 10;
const LARGE_GROUP_RING_BYTES = 2 << 10;
const SMALL_GROUP_MAX = 16;

/** An acknowledgement slot: its state, text length and sleepers words, then the receive's error text. */
export const ACK_HEADER_BYTES = 16;
const ACK_SLOT_BYTES = ACK_HEADER_BYTES + MAX_ERROR_BYTES;

export function mailboxRingBytes(size: number): number {
  if (size <= FEW_RANKS_MAX) return FEW_RANKS_RING_BYTES;
  return size <= SMALL_GROUP_MAX ? SMALL_GROUP_RING_BYTES : LARGE_GROUP_RING_BYTES;
}

/** Inline sends in flight per ordered pair (more go through the store). */
export function ackSlots(size: number): number {
  return size <= SMALL_GROUP_MAX ? 8 : 4;
}

export function pairBytes(size: number): number {
  return RING_CONTROL_BYTES + mailboxRingBytes(size) + ackSlots(size) * ACK_SLOT_BYTES;
}

/** Byte offset, within its pair, of acknowledgement slot `slot`. */
export function ackSlotOffset(size: number, slot: number): number {
  return RING_CONTROL_BYTES + mailboxRingBytes(size) + slot * ACK_SLOT_BYTES;
}

/** Bytes of a group's mailbox region: a ring and its acknowledgement slots per ordered pair of its ranks. */
export function mailboxBytes(size: number): number {
  return size * size * pairBytes(size);
}

/** Where a pair's bytes start. */
export interface PairBytes {
  buffer: ArrayBufferLike;
  byteOffset: number;
}

export interface MailboxMemory {
  /** Pair src → dst (group ranks); undefined while dst has not made its inbox. */
  pair(src: number, dst: number): PairBytes | undefined;
  abort: JobStop | undefined;
  /** Wakes group rank `rank`'s wait on words[index], where one counted itself on words[sleepers] (see wait.ts's wake). */
  wake(words: Int32Array, index: number, sleepers: number, rank: number): void;
  /** Wakes group rank `rank`'s waits on words[index], counted or not. */
  notify(words: Int32Array, index: number, rank: number): void;
  /** How a wait parks on memory that Atomics cannot park on (WaitOptions.park); undefined where it can. */
  park: ((ms: number) => Promise<void>) | undefined;
  /** This rank is done with the mailboxes (its group destroyed): what it holds of them goes. */
  release(): void;
}

/**
 * The mailboxes of the group of `ranks` (global ranks; this rank is group
 * rank `rank`) under `key`, where its members map common memory: one region
 * (thread ranks), a file each (process ranks of one node); else undefined.
 */
export function mailboxMemory(
  store: TensorStore,
  key: string,
  ranks: readonly number[],
  rank: number,
): MailboxMemory | undefined {
  const region = store.sharedRegion?.(key, mailboxBytes(ranks.length));
  if (region) return regionMailboxes(region, ranks.length);
  return onOneNode(store, ranks) ? nodeFilesMailboxes(store, key, ranks, rank) : undefined;
}

/** A group's mailboxes in one region its thread ranks share, pair after pair. */
export function regionMailboxes(region: SharedRegion, size: number): MailboxMemory {
  const bytes = pairBytes(size);
  return {
    pair: (src, dst) => ({
      buffer: region.buffer,
      byteOffset: region.byteOffset + (src * size + dst) * bytes,
    }),
    abort: region.abort,
    wake: (words, index, sleepers) => void wake(words, index, sleepers),
    notify: (words, index) => void Atomics.notify(words, index),
    park: undefined,
    // The region is the job's arena's, for the job's life.
    release: () => {},
  };
}

/**
 * The mailboxes of a group whose members are processes of one node, each
 * member's inbox (the pairs into it) a file of the job directory that it
 * makes now (TensorStore.nodeRegion); undefined where the store maps no files.
 */
export function nodeFilesMailboxes(
  store: TensorStore,
  key: string,
  ranks: readonly number[],
  rank: number,
): MailboxMemory | undefined {
  const size = ranks.length;
  const bytes = pairBytes(size);
  const inboxBytes = size * bytes;
  const own = store.nodeRegion?.(key, ranks[rank], inboxBytes);
  if (!own) return undefined;
  const inboxes: (NodeRegion | undefined)[] = ranks.map((_, member) => (member === rank ? own : undefined));
  const bells = store.nodeDoorbells?.();
  const ring = (member: number) => bells?.ring(ranks[member]);
  return {
    pair: (src, dst) => {
      inboxes[dst] ??= store.nodeRegion?.(key, ranks[dst], inboxBytes);
      const inbox = inboxes[dst];
      return inbox && { buffer: inbox.buffer, byteOffset: src * bytes };
    },
    abort: own.abort,
    wake: (words, _index, sleepers, member) => {
      if (Atomics.load(words, sleepers) !== 0) ring(member);
    },
    notify: (_words, _index, member) => ring(member),
    park: bells && ((ms) => bells.park(ms)),
    release: () => {
      for (const [member, inbox] of inboxes.entries())
        if (inbox) store.releaseNodeRegion?.(key, ranks[member]);
      inboxes.fill(undefined);
    },
  };
}
