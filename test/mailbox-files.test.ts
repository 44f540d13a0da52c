/**
 * The mailboxes of process ranks of one node (src/thread-group/store-backend/
 * mailbox-memory.ts): each rank's inbox a file of the job directory, waits
 * parked on the process's doorbell. Two ranks' mailboxes over two
 * FileTensorStores of one job, driven from this thread as their processes
 * would drive them. Parks here end only when rung (not after their usual
 * bound), so each wait below ends only if its waker rang the right rank: the
 * receiver for a record, the sender for its acknowledgement and for room in a
 * full ring.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileTensorStore } from '../src/file-store/index.ts';
import { Tensor } from '../src/index.ts';
import type { CallInfo, GroupView } from '../src/thread-group/backend.ts';
import { inlinePayloadMax, Mailbox, type MailRecord } from '../src/thread-group/store-backend/mailbox.ts';
import { type MailboxMemory, nodeFilesMailboxes } from '../src/thread-group/store-backend/mailbox-memory.ts';
import { storeJobs } from './fixtures/store-jobs.ts';

const { newJob, opened } = storeJobs('mailbox-files');
const RANKS = [0, 1];
const KEY = 'w:mail';
const call: CallInfo = { seq: 0, signature: 'p2p', timeoutMs: 20_000 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A rank's memory whose parks last until rung (a wake that went astray would hang the test). */
function untilRung(store: FileTensorStore, rank: number): MailboxMemory {
  const memory = nodeFilesMailboxes(store, KEY, RANKS, rank) as MailboxMemory;
  const bells = store.nodeDoorbells();
  expect(memory.park && bells).toBeDefined();
  return { ...memory, park: () => bells!.park(60_000) };
}

function mailbox(store: FileTensorStore, rank: number): Mailbox {
  const group: GroupView = { id: 'w', name: 'world', rank, size: 2, ranks: RANKS };
  return new Mailbox(untilRung(store, rank), group);
}

/** Two ranks' stores of one job, with rings (and so doorbells) between them. */
function stores(): FileTensorStore[] {
  const dir = newJob();
  const made = RANKS.map(
    (rank) => new FileTensorStore({ dir, rank, timeoutMs: 20_000, rings: { ranks: RANKS } }),
  );
  opened.push(...made);
  return made;
}

const floats = (record: MailRecord) => Array.from(new Float32Array(record.bytes!.slice().buffer));

describe('mailboxes in files of the job directory', { timeout: 15_000 }, () => {
  it('wakes a receive that parked before its record came', async () => {
    const [a, b] = stores();
    const [sender, receiver] = [mailbox(a, 0), mailbox(b, 1)];
    const receiving = receiver.receive(call, 0, 7, 0, floats);
    expect(receiving).toBeInstanceOf(Promise);
    await sleep(20);
    // Room in the ring: written as it returns.
    expect(sender.post(call, 1, 7, 0, Tensor.fromArray([1, 2, 3]))).toBeUndefined();
    expect(await receiving).toEqual([1, 2, 3]);
  });

  it("wakes a sender parked on its acknowledgement with the receive's verdict", async () => {
    const [a, b] = stores();
    const [sender, receiver] = [mailbox(a, 0), mailbox(b, 1)];
    const taken = sender.sendInline(call, 1, 0, 0, Tensor.fromArray([4, 5]));
    const refused = sender.sendInline(call, 1, 0, 1, Tensor.fromArray([6]));
    await sleep(20);
    expect(receiver.receive(call, 0, 0, 0, floats)).toEqual([4, 5]);
    await taken;
    expect(() =>
      receiver.receive(call, 0, 0, 1, () => {
        throw new Error('rank 1 expects float32[2]');
      }),
    ).toThrow(/expects/);
    await expect(refused).rejects.toThrow(/rank 1 expects float32\[2\]/);
  });

  it('wakes a sender whose ring was full once the receiver read, and keeps the order', async () => {
    const [a, b] = stores();
    const [sender, receiver] = [mailbox(a, 0), mailbox(b, 1)];
    const numel = inlinePayloadMax(2) / 4;
    const count = 8;
    const posts = Array.from({ length: count }, (_, i) =>
      sender.post(call, 1, 0, i, Tensor.full([numel], i, 'float32')),
    );
    // A quarter-ring message each: the ring takes three, the rest wait for room.
    expect(posts.filter((p) => p instanceof Promise).length).toBeGreaterThan(0);
    await sleep(20);
    for (let i = 0; i < count; i++) {
      const got = await receiver.receive(call, 0, 0, i, (record) => floats(record)[numel - 1]);
      expect(got).toBe(i);
    }
    await Promise.all(posts);
  });

  it("makes each rank's inbox when its mailbox is made: a sender waits for the receiver's; the files go at close", async () => {
    const [a, b] = stores();
    const sender = mailbox(a, 0);
    const posting = sender.post(call, 1, 0, 0, Tensor.fromArray([9]));
    expect(posting).toBeInstanceOf(Promise);
    await sleep(20);
    const receiver = mailbox(b, 1);
    await posting;
    expect(await receiver.receive(call, 0, 0, 0, floats)).toEqual([9]);
    const inboxes = () => readdirSync(join(a.dir, 'tmp')).filter((name) => name.startsWith('region.'));
    expect(inboxes().length).toBe(2);
    a.close();
    b.close();
    expect(inboxes()).toEqual([]);
  });

  it("gives up its inbox when its group is destroyed; a peer's mapping of it stays readable", async () => {
    const [a, b] = stores();
    const memories = [nodeFilesMailboxes(a, KEY, RANKS, 0), nodeFilesMailboxes(b, KEY, RANKS, 1)];
    const inboxes = () =>
      readdirSync(join(a.dir, 'tmp'))
        .filter((name) => name.startsWith('region.'))
        .sort();
    expect(inboxes()).toEqual([`region.w%3Amail.0`, `region.w%3Amail.1`]);
    const senders = memories[0]!.pair(0, 1);
    memories[1]!.release();
    expect(inboxes()).toEqual([`region.w%3Amail.0`]);
    expect(new Int32Array(senders!.buffer, senders!.byteOffset, 4)[0]).toBe(0);
    memories[0]!.release();
    expect(inboxes()).toEqual([]);
  });
});
