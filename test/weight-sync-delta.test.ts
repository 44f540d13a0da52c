/**
 * WeightSyncEngine's delta mode on thread ranks over "nodes" (fixtures/node-store.ts,
 * which counts the bytes that cross between nodes): a sync sends only the buckets
 * whose content changed since the last sync every receiver took whole, the
 * receivers end bit-exact, the bytes into each node shrink to the buckets sent,
 * and a delta that cannot be exact is refused.
 */
import { expect } from 'vitest';
import { type RankContext, type Tensor, WeightSyncEngine, type WeightSyncStats } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { planBuckets } from '../src/weight-sync/plan.ts';
import { groupOnNodes, type NodeCounts } from './fixtures/node-store.ts';
import { compareModels, TEST_BUCKET_BYTES, testModel } from './fixtures/weight-sync-model.ts';

/** Senders 0 and 1 on node a; receivers 2, 3, 4 on node b (2 relays for 3 and 4) and 5 alone on c. */
const NODES = ['a', 'a', 'b', 'b', 'b', 'c'];
const SENDERS = [0, 1];
const RECEIVERS = [2, 3, 4, 5];
/** Headers, stream ends and outcomes, at most, per bucket and sender: well under a bucket's payload. */
const MAX_HEADER_BYTES = 1024;

/** `model` with the tensors named in `changed` refilled (the rest copied: delta compares content, not objects). */
function changedModel(
  model: Array<[string, Tensor]>,
  changed: string[],
  seed: number,
): Array<[string, Tensor]> {
  const fresh = new Map(testModel(seed));
  return model.map(([name, t]) => [name, changed.includes(name) ? fresh.get(name)! : t.clone()]);
}

/** The buckets a delta sync from `previous` to `model` must send, and the bytes of those it may skip. */
async function expectedDelta(model: Array<[string, Tensor]>, changed: string[]) {
  const sent = { buckets: 0, bytes: 0 };
  const skipped = { buckets: 0, bytes: 0 };
  for await (const b of planBuckets(model, TEST_BUCKET_BYTES, 'test')) {
    const into = b.chunks.some((c) => changed.includes(c.name)) ? sent : skipped;
    into.buckets++;
    into.bytes += b.payloadBytes;
  }
  return { sent, skipped };
}

interface Receiver {
  engine: WeightSyncEngine;
  /** What the caller holds: every tensor it was given, kept (borrowed ones copied). */
  held: Map<string, Tensor>;
  borrow: boolean;
}

/** Takes a sync into `held`; `leaveAfter`: stop after that many tensors. Returns the names given. */
async function take(r: Receiver, leaveAfter = Number.POSITIVE_INFINITY): Promise<string[]> {
  const names: string[] = [];
  for await (const [name, t] of r.engine.receive({ borrow: r.borrow })) {
    if (names.length >= leaveAfter) break;
    names.push(name);
    r.held.set(name, r.borrow ? t.clone() : t);
  }
  return names;
}

for (const lend of [true, false]) {
  rankTest(
    `delta (${lend ? 'lent' : 'packed'}): skips exactly the unchanged buckets, exact, fewer bytes across nodes`,
    { worldSize: NODES.length },
    async (ctx) => {
      const counts: NodeCounts = { bytes: 0, into: {} };
      const { group } = groupOnNodes(ctx, NODES, counts);
      const options = {
        senders: SENDERS,
        receivers: RECEIVERS,
        bucketBytes: TEST_BUCKET_BYTES,
        lend,
        delta: true,
      };
      const engine = new WeightSyncEngine(group, options);
      const receiver: Receiver = { engine, held: new Map(), borrow: ctx.rank % 2 === 0 };
      let model = testModel(1);
      const total = await expectedDelta(
        model,
        model.map(([n]) => n),
      );

      /** One sync of `model`, `changed` since the last; checks stats, exactness and bytes into nodes b and c. */
      const sync = async (changed: string[], what: string) => {
        const { sent, skipped } = await expectedDelta(model, changed);
        counts.into = {};
        let stats: WeightSyncStats | undefined;
        if (engine.role === 'sender') stats = await engine.send(model);
        else await take(receiver);
        stats ??= engine.lastSync;
        const problems =
          engine.role === 'receiver'
            ? compareModels(
                model.map(([n]) => [n, receiver.held.get(n)!]),
                model,
              )
            : [];
        const all = (await ctx.world.allGatherObject({ into: counts.into, problems })) as Array<{
          into: Record<string, number>;
          problems: string[];
        }>;
        for (const [r, c] of all.entries()) expect(c.problems, `${what}: rank ${r}`).toEqual([]);
        if (engine.role === 'receiver') {
          expect(stats, what).toMatchObject({
            buckets: total.sent.buckets,
            skippedBuckets: skipped.buckets,
            skippedBytes: skipped.bytes,
          });
        }
        for (const node of ['b', 'c']) {
          const into = all.reduce((sum, c) => sum + (c.into[node] ?? 0), 0);
          expect(into, `${what}: bytes into node ${node}`).toBeGreaterThanOrEqual(sent.bytes);
          expect(into, `${what}: bytes into node ${node}`).toBeLessThanOrEqual(
            sent.bytes + (total.sent.buckets + SENDERS.length) * MAX_HEADER_BYTES,
          );
        }
        return stats;
      };

      const all = model.map(([n]) => n);
      await sync(all, 'first sync: everything');
      // 'scale' shares bucket 0 with the first piece of 'layer.0.big' (3.5 buckets), whose other buckets
      // are skipped: the receiver must not yield that tensor from a fresh piece and kept ones.
      // 'layer.1.weight' lies in two buckets: both must travel.
      model = changedModel(model, ['scale', 'layer.1.weight'], 2);
      const second = await sync(['scale', 'layer.1.weight'], 'second sync: two tensors changed');
      expect(second!.skippedBuckets).toBeGreaterThan(0);
      await sync([], 'third sync: nothing changed');

      // Receiver 3 leaves its next sync early: it does not hold that sync, so the one after sends everything.
      model = changedModel(model, ['tail'], 3);
      if (engine.role === 'sender') await engine.send(model);
      else await take(receiver, ctx.rank === 3 ? 1 : undefined);
      await sync(all, 'after a receiver left early: everything again');
      await ctx.world.barrier();
      group.destroy();
    },
  );
}

/** Syncs `testModel(1)` twice, then a third time on a receiver engine made anew: what each rank saw. */
async function syncOnNewReceiverEngine(ctx: RankContext): Promise<string> {
  const { group } = groupOnNodes(ctx, NODES, { bytes: 0 });
  const options = {
    senders: SENDERS,
    receivers: RECEIVERS,
    bucketBytes: TEST_BUCKET_BYTES,
    delta: true,
    timeoutMs: 3000,
  };
  let engine = new WeightSyncEngine(group, options);
  const model = testModel(1);
  const receiver = (): Receiver => ({ engine, held: new Map(), borrow: false });
  for (let i = 0; i < 2; i++) {
    if (engine.role === 'sender') await engine.send(model);
    else await take(receiver());
  }
  // Rank 5 starts over with a new engine on the same tag: it holds nothing the senders could skip.
  if (ctx.rank === 5) engine = new WeightSyncEngine(group, options);
  const outcome = await (engine.role === 'sender' ? engine.send(model) : take(receiver())).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  await ctx.world.barrier();
  group.destroy();
  return outcome;
}

rankTest(
  'delta: a receiver that does not hold the sync a skipped bucket needs refuses it',
  { worldSize: NODES.length },
  async (ctx) => {
    const outcome = await syncOnNewReceiverEngine(ctx);
    const refused =
      /skipped as unchanged since that sender's sync 2, but this receiver's caller took no sync of it whole: a delta sync cannot be exact here/;
    if (ctx.rank === 5) expect(outcome).toMatch(refused);
    if (SENDERS.includes(ctx.rank)) expect(outcome).toMatch(/receiver 5 failed: .*cannot be exact/);
  },
);

rankTest(
  'delta: a receiver not given delta refuses a skipped bucket',
  { worldSize: NODES.length },
  async (ctx) => {
    const { group } = groupOnNodes(ctx, NODES, { bytes: 0 });
    const delta = ctx.rank !== 5;
    const engine = new WeightSyncEngine(group, {
      senders: SENDERS,
      receivers: RECEIVERS,
      bucketBytes: TEST_BUCKET_BYTES,
      delta,
      timeoutMs: 3000,
    });
    const model = testModel(1);
    const receiver: Receiver = { engine, held: new Map(), borrow: false };
    const once = () => (engine.role === 'sender' ? engine.send(model) : take(receiver));
    await once();
    const outcome = await once().then(
      () => 'ok',
      (e: Error) => e.message,
    );
    if (ctx.rank === 5)
      expect(outcome).toMatch(/was not given delta: the ranks were given different delta options/);
    if (SENDERS.includes(ctx.rank)) expect(outcome).toMatch(/receiver 5 failed/);
    await ctx.world.barrier();
    group.destroy();
  },
);
