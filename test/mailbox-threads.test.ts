/**
 * Point-to-point messages between real rank threads through their group's mailboxes
 * (src/thread-group/store-backend/mailbox.ts): small ones inline, larger ones as markers for the
 * keyed store, in one order per stream. Every dtype on both sides of the inline cutoff at 2, 3, 4,
 * 8 and 17 ranks (past 16 the rings are smaller); many in-flight sends on several tags received in another order (some kept aside,
 * some past the acknowledgement slots through the store); recvFromAny; both ends failing on a
 * mismatch and on a receive that failed its checks; a lost rank; the bound on what a rank keeps aside.
 */
import { expect } from 'vitest';
import { CommTimeoutError, RankFailedError, Tensor } from '../src/index.ts';
import { DTYPES } from '../src/tensor/dtype.ts';
import { rankTest } from '../src/testing/index.ts';
import { CallMismatchError } from '../src/thread-group/backend.ts';
import { STASHED_MAX } from '../src/thread-group/store-backend/mailbox.ts';
import { failure } from './fixtures/failure.ts';
import { messagesOnThreeTags, ringOfMessages } from './fixtures/mailbox-messages.ts';

// Largest first: later tests reuse its warm rank threads.
for (const worldSize of [8, 4, 3, 2]) {
  rankTest(
    `every dtype and size on both sides of the inline cutoff, on ${worldSize} thread ranks`,
    { worldSize },
    async (ctx) => expect(await ringOfMessages(ctx, DTYPES)).toEqual([]),
  );
}

rankTest(
  "17 thread ranks (the smallest group with the larger groups' smaller rings): messages around their cutoff",
  { worldSize: 17, collectiveTimeoutMs: 120_000 },
  async (ctx) => expect(await ringOfMessages(ctx, ['float32', 'uint8'])).toEqual([]),
);

rankTest(
  'many un-awaited sends on three tags, small and large, are received per tag in order in another order of tags',
  { worldSize: 2 },
  async (ctx) => expect(await messagesOnThreeTags(ctx, 300)).toEqual([]),
);

rankTest(
  'recvFromAny takes inline messages from whichever peer sent first, and each once',
  { worldSize: 4 },
  async (ctx) => {
    if (ctx.rank !== 0) {
      await ctx.world.send(Tensor.full([3], ctx.rank, 'float64'), 0, { tag: 5 });
      await ctx.world.send(Tensor.full([3], 10 * ctx.rank, 'float64'), 0, { tag: 5 });
      return;
    }
    const got: Record<number, number[]> = { 1: [], 2: [], 3: [] };
    for (let k = 0; k < 6; k++) {
      const t = Tensor.zeros([3], 'float64');
      const src = await ctx.world.recvFromAny(t, { tag: 5 });
      expect(t.toArray()).toEqual([t.data[0], t.data[0], t.data[0]]);
      got[src].push(t.data[0] as number);
    }
    expect(got).toEqual({ 1: [1, 10], 2: [2, 20], 3: [3, 30] });
  },
);

rankTest(
  "a shape mismatch on an inline message fails the send and the receive in the receiver's words, and the stream goes on",
  { worldSize: 2 },
  async (ctx) => {
    const call = ctx.rank === 0 ? ctx.world.send(Tensor.ones([4]), 1) : ctx.world.recv(Tensor.zeros([3]), 0);
    const error = await failure(call);
    expect(error).toBeInstanceOf(CallMismatchError);
    expect(error.message).toMatch(/rank 1 expects float32\[3\] from rank 0, which sent float32\[4\]/);
    const t = Tensor.full([2], 7, 'int32');
    if (ctx.rank === 0) await ctx.world.send(t, 1);
    else {
      const into = Tensor.zeros([2], 'int32');
      await ctx.world.recv(into, 0);
      expect(into.toArray()).toEqual([7, 7]);
    }
  },
);

rankTest(
  'a receive that fails its own checks takes its inline message and fails the send with its error',
  { worldSize: 2 },
  async (ctx) => {
    if (ctx.rank === 0) {
      const error = await failure(ctx.world.send(Tensor.ones([2, 2]), 1));
      expect(error.message).toMatch(/rank 1: recv: tensor float32\[2,2\] is not contiguous/);
    } else {
      const strided = Tensor.zeros([2, 2]).transpose(0, 1);
      const error = await failure(ctx.world.recv(strided, 0));
      expect(error.message).toMatch(/not contiguous/);
    }
    // The failed receive took its message: the next one is the next send's.
    if (ctx.rank === 0) await ctx.world.send(Tensor.full([1], 3), 1);
    else {
      const into = Tensor.zeros([1]);
      await ctx.world.recv(into, 0);
      expect(into.toArray()).toEqual([3]);
    }
  },
);

rankTest(
  'a rank lost while a peer waits on its mailbox fails that peer long before its timeout',
  { worldSize: 3, collectiveTimeoutMs: 20_000, faults: [{ rank: 1, op: 'recv', nth: 0, kind: 'exit' }] },
  async (ctx) => {
    if (ctx.rank === 1) {
      await ctx.world.recv(Tensor.zeros([2]), 0);
      return;
    }
    const started = performance.now();
    // Rank 2 waits for a message rank 1 will never send; rank 0 for rank 1 to take its message.
    const error = await failure(
      ctx.rank === 2 ? ctx.world.recv(Tensor.zeros([2]), 1) : ctx.world.send(Tensor.ones([2]), 1),
    );
    expect(error).toBeInstanceOf(RankFailedError);
    expect(error.message).toMatch(/rank 1 \(rank-1\)/);
    // A second in the design; the bound leaves a loaded machine room and still rules out the 20 s timeout.
    expect(performance.now() - started).toBeLessThan(5_000);
  },
);

rankTest(
  'a receive behind more messages of other tags than a rank keeps aside times out saying so; they are received after',
  { worldSize: 2, collectiveTimeoutMs: 60_000 },
  async (ctx) => {
    const flood = STASHED_MAX + 300;
    if (ctx.rank === 0) {
      const works = [];
      for (let i = 0; i < flood; i++) works.push(ctx.world.send(Tensor.full([1], i, 'int32'), 1, { tag: 1 }));
      const last = failure(ctx.world.send(Tensor.full([1], -1, 'int32'), 1, { tag: 2, timeoutMs: 3_000 }));
      await Promise.all(works);
      expect((await last).message).toMatch(/send.*timed out after 3000 ms/);
      await ctx.world.barrier();
      return;
    }
    const error = await failure(ctx.world.recv(Tensor.zeros([1], 'int32'), 0, { tag: 2, timeoutMs: 1_000 }));
    expect(error).toBeInstanceOf(CommTimeoutError);
    expect(error.message).toContain(
      `this rank holds ${STASHED_MAX} earlier messages from it that no receive took yet`,
    );
    for (let i = 0; i < flood; i++) {
      const into = Tensor.zeros([1], 'int32');
      await ctx.world.recv(into, 0, { tag: 1 });
      expect(into.data[0]).toBe(i);
    }
    // Staying until the sender's last send timed out: leaving would fail it sooner, for leaving.
    await ctx.world.barrier();
  },
);

rankTest(
  'a waiting receive whose message sat behind a full stash gets it once a receive makes room; nothing new need come',
  { worldSize: 2, collectiveTimeoutMs: 60_000 },
  async (ctx) => {
    if (ctx.rank === 0) {
      const works = [];
      // One more than rank 1 keeps aside: its receive on tag 2 stops reading one record short of its own.
      for (let i = 0; i <= STASHED_MAX; i++)
        works.push(ctx.world.send(Tensor.full([1], i, 'int32'), 1, { tag: 1 }));
      // The last record the ring gets: once rank 1 stopped reading at the full stash, its head never moves again.
      works.push(ctx.world.send(Tensor.full([1], -1, 'int32'), 1, { tag: 2 }));
      await Promise.all(works);
      await ctx.world.barrier();
      return;
    }
    const into = Tensor.zeros([1], 'int32');
    const waiting = ctx.world.recv(into, 0, { tag: 2, timeoutMs: 10_000 });
    // Time for every record to come and for the receive to stop at the full stash (nothing asserts on it).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const first = Tensor.zeros([1], 'int32');
    await ctx.world.recv(first, 0, { tag: 1 });
    expect(first.data[0]).toBe(0);
    await waiting;
    expect(into.data[0]).toBe(-1);
    for (let i = 1; i <= STASHED_MAX; i++) {
      await ctx.world.recv(first, 0, { tag: 1 });
      expect(first.data[0]).toBe(i);
    }
    // A stored send completes once its receive released the value: leaving first would fail it, for leaving.
    await ctx.world.barrier();
  },
);

rankTest(
  'a receive whose inline message is there already completes as it returns, with the bytes in place',
  { worldSize: 2 },
  async (ctx) => {
    const sent = Tensor.fromArray(new Float64Array([1.5, -2, 3]), [3], 'float64');
    if (ctx.rank === 0) {
      // The record is in rank 1's mailbox before the barrier; the send completes once rank 1 took it.
      const sending = ctx.world.send(sent, 1);
      await ctx.world.barrier();
      await sending;
      return;
    }
    await ctx.world.barrier();
    const into = Tensor.zeros([3], 'float64');
    const receiving = ctx.world.recv(into, 0);
    expect(receiving.done()).toBe(true);
    expect(into.toArray()).toEqual([1.5, -2, 3]);
    expect(await receiving).toBe(into);
  },
);

rankTest(
  'a send that waited long enough to park gets its verdict from a receive that comes later, each round',
  { worldSize: 2 },
  async (ctx) => {
    const at = Tensor.zeros([1], 'float64');
    for (let round = 0; round < 3; round++) {
      if (ctx.rank === 0) {
        // Each send waits, parked, for a receive that comes 30 ms later: the first takes it, the second refuses it.
        await ctx.world.send(at.fill_(round), 1);
        const refused = await failure(ctx.world.send(at, 1));
        expect(refused).toBeInstanceOf(CallMismatchError);
        expect(refused.message).toMatch(/float64\[2\]/);
      } else {
        const into = Tensor.zeros([1], 'float64');
        await new Promise((resolve) => setTimeout(resolve, 30));
        await ctx.world.recv(into, 0);
        expect(into.data[0]).toBe(round);
        await new Promise((resolve) => setTimeout(resolve, 30));
        expect(await failure(ctx.world.recv(Tensor.zeros([2], 'float64'), 0))).toBeInstanceOf(
          CallMismatchError,
        );
      }
    }
  },
);
