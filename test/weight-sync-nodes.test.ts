/**
 * WeightSyncEngine across nodes, on thread ranks whose memory store is wrapped
 * to say which "node" each rank is on and to count the bytes that cross
 * between nodes (fixtures/node-store.ts). Each receiving node must take the
 * payload over the network once, whatever its number of receivers (its relay
 * hands it on), and every receiver must get the model bit-exact: where the
 * group maps node memory (the relay's followers copy each bucket from it) and
 * where it does not (the relay hands each bucket on as messages).
 */
import { expect } from 'vitest';
import { type RankContext, type Tensor, type ThreadGroup, WeightSyncEngine } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { planBuckets } from '../src/weight-sync/plan.ts';
import { groupOnNodes, type NodeCounts } from './fixtures/node-store.ts';
import { compareModels, TEST_BUCKET_BYTES, testModel } from './fixtures/weight-sync-model.ts';

/** Senders and one receiver on node a, then four ranks on node b and four on node c. */
const PER_NODE = 4;
const nodeLayout = (senders: number) => [
  ...Array<string>(senders + 1).fill('a'),
  ...Array<string>(PER_NODE).fill('b'),
  ...Array<string>(PER_NODE).fill('c'),
];

/**
 * Headers and stream ends may cross besides the payload: a bound well under
 * the payload, so that a second copy of it into a node fails the test.
 */
const MAX_HEADER_BYTES = 1024;

/** A group over the node layout that says which node a rank is on (group.nodeOf), and counts what crosses. */
function groupOver(ctx: RankContext, nodeOf: string[], counts: NodeCounts, nodeMemory: boolean): ThreadGroup {
  return groupOnNodes(ctx, nodeOf, counts, { nodeMemory }).group;
}

const MEMORY = (nodeMemory: boolean) => (nodeMemory ? 'node memory' : 'no node memory');

/** The payload bytes of the model's buckets, as every sender plans them. */
async function payloadBytes(model: Array<[string, Tensor]>): Promise<{ bytes: number; buckets: number }> {
  let bytes = 0;
  let buckets = 0;
  for await (const b of planBuckets(model, TEST_BUCKET_BYTES, 'test')) {
    bytes += b.payloadBytes;
    buckets++;
  }
  return { bytes, buckets };
}

/** Borrowing, a relay's buckets land in its two reused buffers: copies are kept, as a caller must. */
async function receiveAll(engine: WeightSyncEngine, borrow = false): Promise<Array<[string, Tensor]>> {
  const got: Array<[string, Tensor]> = [];
  for await (const [name, t] of engine.receive({ borrow })) got.push([name, borrow ? t.clone() : t]);
  return got;
}

for (const [senderCount, nodeMemory] of [1, 2, 3].flatMap((n) => [[n, true] as const, [n, false] as const])) {
  const nodeOf = nodeLayout(senderCount);
  rankTest(
    `${senderCount} sender(s), ${MEMORY(nodeMemory)}: each node takes the payload once, for 1–4 receivers a node, bit-exact`,
    { worldSize: nodeOf.length },
    async (ctx) => {
      const senders = Array.from({ length: senderCount }, (_, i) => i);
      const onB = nodeOf.flatMap((n, r) => (n === 'b' ? [r] : []));
      const onC = nodeOf.flatMap((n, r) => (n === 'c' ? [r] : []));
      for (let m = 1; m <= PER_NODE; m++) {
        // b gets m receivers and c the rest (4..1); the first receiver on b is not b's lowest rank
        // when m < 4, so the relay is chosen among receivers, not among the node's ranks. Even m
        // receive borrowing (reused buffers), odd m each bucket in memory of its own.
        const receivers = [senderCount, ...onB.slice(PER_NODE - m), ...onC.slice(0, PER_NODE + 1 - m)];
        const counts: NodeCounts = { bytes: 0, into: {}, landWishes: [] };
        const group = groupOver(ctx, nodeOf, counts, nodeMemory);
        const model = testModel(10 * senderCount + m);
        let problems: string[] = [];
        if (senders.includes(ctx.rank) || receivers.includes(ctx.rank)) {
          const engine = new WeightSyncEngine(group, { senders, receivers, bucketBytes: TEST_BUCKET_BYTES });
          if (engine.role === 'sender') await engine.send(model);
          else problems = compareModels(await receiveAll(engine, m % 2 === 0), model);
        }
        const all = (await ctx.world.allGatherObject({ into: counts.into, problems })) as Array<{
          into: Record<string, number>;
          problems: string[];
        }>;
        const into = (node: string) => all.reduce((sum, c) => sum + (c.into[node] ?? 0), 0);
        const { bytes, buckets } = await payloadBytes(model);
        for (const node of ['b', 'c']) {
          const what = `${senderCount} sender(s), ${m} receiver(s) on b: bytes into node ${node}`;
          expect(into(node), what).toBeGreaterThanOrEqual(bytes);
          expect(into(node), what).toBeLessThanOrEqual(bytes + (buckets + senderCount) * MAX_HEADER_BYTES);
        }
        for (const [r, c] of all.entries()) expect(c.problems, `receiver ${r}`).toEqual([]);
        // A follower (a receiver of b or c but its lowest, the relay) posts a payload receive for each entry
        // only where its relay has no node memory to hand the buckets on in.
        const follower = [onB, onC].some((node) => {
          const mine = node.filter((r) => receivers.includes(r));
          return mine.includes(ctx.rank) && ctx.rank !== Math.min(...mine);
        });
        if (follower)
          expect(counts.landWishes!.length > 0, `rank ${ctx.rank}'s payload receives`).toBe(!nodeMemory);
        group.destroy();
      }
    },
  );
}

/** Node b holds 2, 3 and 4 (rank 2 relays for 3 and 4); rank 5 is alone on c. */
const FAILURE_NODES = ['a', 'a', 'b', 'b', 'b', 'c'];

/** A sync from rank 0 to ranks 1–5 in which rank `refuser` refuses the model's largest tensor: each rank's outcome. */
async function syncRefusedBy(
  ctx: RankContext,
  refuser: number,
  nodeMemory: boolean,
  phase?: number,
): Promise<string> {
  const group = groupOver(ctx, FAILURE_NODES, { bytes: 0 }, nodeMemory);
  const engine = new WeightSyncEngine(group, {
    senders: [0],
    receivers: [1, 2, 3, 4, 5],
    bucketBytes: TEST_BUCKET_BYTES,
    timeoutMs: 3000,
    phase,
    ...(ctx.rank === refuser ? { maxTensorBytes: 8192 } : {}),
  });
  const outcome = await (engine.role === 'sender' ? engine.send(testModel(1)) : receiveAll(engine)).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  // The sender stops at the failure, so ranks 1 and 5 fail too (as when any receiver fails).
  await ctx.world.barrier();
  group.destroy();
  return outcome;
}

const REFUSED = 'limit 8192, maxTensorBytes';

for (const nodeMemory of [true, false]) {
  rankTest(
    `a relay that fails fails its node and names itself; the senders hear of it (${MEMORY(nodeMemory)})`,
    { worldSize: 6 },
    async (ctx) => {
      const outcome = await syncRefusedBy(ctx, 2, nodeMemory);
      if (ctx.rank === 0) expect(outcome).toMatch(new RegExp(`receiver 2 failed: .*${REFUSED}`));
      if (ctx.rank === 2) expect(outcome).toContain(REFUSED);
      if (ctx.rank === 3 || ctx.rank === 4) {
        expect(outcome).toMatch(new RegExp(`relay 2 \\(receiving for 3, 4\\) failed: .*${REFUSED}`));
      }
    },
  );

  // Phase 1 posts nothing ahead; with more, the other follower has header and note receives posted
  // ahead, and the first of them takes the relay's failed stream end.
  for (const phase of [1, 4]) {
    rankTest(
      `a relay's follower that fails fails its relay, which fails the node; the senders hear of it (${MEMORY(nodeMemory)}, phase ${phase})`,
      { worldSize: 6 },
      async (ctx) => {
        const outcome = await syncRefusedBy(ctx, 3, nodeMemory, phase);
        if (ctx.rank === 0) expect(outcome).toMatch(/receiver [23] failed/);
        if (ctx.rank === 3) expect(outcome).toContain(REFUSED);
        if (ctx.rank === 2)
          expect(outcome).toMatch(/relay 2 could not hand bucket \d+ on to receiver\(s\) 3, 4 on its node/);
        if (ctx.rank === 4)
          expect(outcome).toMatch(/relay 2 \(receiving for 3, 4\) failed: .*could not hand bucket/);
      },
    );
  }
}
