/**
 * receive({ into }) on thread ranks, over "nodes" (fixtures/node-store.ts,
 * whose stores pack) and on one node (lent): each receiver loads the sync
 * into tensors of its own, bit-exact for every dtype mix and a tensor split
 * over buckets, with delta on and off; a name `into` does not give is
 * yielded as without it; a relay's followers receive each entry into its
 * target, or copy it there from the relay's node memory; a receiver on
 * another node than the senders takes a large entry alone, straight into
 * its target; a target that does not match the stream's tensor is refused
 * before anything of its bucket is written.
 */
import { expect } from 'vitest';
import { type RankContext, Tensor, type ThreadGroup, WeightSyncEngine } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { planBuckets } from '../src/weight-sync/plan.ts';
import { groupOnNodes, type NodeCounts } from './fixtures/node-store.ts';
import { compareModels, TEST_BUCKET_BYTES, testModel } from './fixtures/weight-sync-model.ts';

/** Senders 0 and 1 on node a; receivers 2, 3, 4 on node b (2 relays for 3 and 4) and 5 alone on c. */
const NODES = ['a', 'a', 'b', 'b', 'b', 'c'];
const SENDERS = [0, 1];
const RECEIVERS = [2, 3, 4, 5];
const FOLLOWERS = [3, 4];
/** Names `into` leaves out: a tensor that fits in a bucket and one split over two. */
const LEFT_OUT = ['scale', 'layer.1.weight'];

type Model = Array<[string, Tensor]>;

/** Zeroed tensors like the model's, for every name but LEFT_OUT. */
function targetsLike(model: Model): Map<string, Tensor> {
  return new Map(
    model.filter(([n]) => !LEFT_OUT.includes(n)).map(([n, t]) => [n, Tensor.zeros(t.shape, t.dtype)]),
  );
}

/** `model` with the tensors named in `changed` refilled from `seed`, the rest copied. */
function changedModel(model: Model, changed: string[], seed: number): Model {
  const fresh = new Map(testModel(seed));
  return model.map(([name, t]) => [name, changed.includes(name) ? fresh.get(name)! : t.clone()]);
}

/** Where the ranks are: over NODES, packed (node-store.ts's stores lend no views), with or without node memory; or on one node. */
type Layout = 'nodes, packed' | 'nodes, packed, node memory' | 'one node, lent';

/** The ranks as `layout` says, counting `counts` over nodes; on one node the world, where senders lend their tensors. */
function groupFor(ctx: RankContext, layout: Layout, counts: NodeCounts): ThreadGroup {
  if (layout === 'one node, lent') return ctx.world;
  return groupOnNodes(ctx, NODES, counts, { nodeMemory: layout.endsWith('node memory') }).group;
}

for (const layout of ['nodes, packed', 'nodes, packed, node memory', 'one node, lent'] as const) {
  const onNodes = layout !== 'one node, lent';
  for (const delta of [false, true]) {
    rankTest(
      `into (${layout}, delta ${delta ? 'on' : 'off'}): every receiver loads the model exact`,
      { worldSize: NODES.length },
      async (ctx) => {
        const counts: NodeCounts = { bytes: 0, landWishes: [] };
        const group = groupFor(ctx, layout, counts);
        const engine = new WeightSyncEngine(group, {
          senders: SENDERS,
          receivers: RECEIVERS,
          bucketBytes: TEST_BUCKET_BYTES,
          delta,
        });
        expect(group.lendsViews).toBe(!onNodes);
        let model = testModel(1);
        const targets = targetsLike(model);
        // Even ranks borrow and give a map, odd ranks do neither and give a function.
        const borrow = ctx.rank % 2 === 0;
        const into = borrow ? targets : (name: string) => targets.get(name);
        /** Tensors yielded for the names `into` leaves out, kept as a caller keeps them. */
        const kept = new Map<string, Tensor>();

        const sync = async (what: string) => {
          let problems: string[] = [];
          if (engine.role === 'sender') await engine.send(model);
          else {
            for await (const [name, t] of engine.receive({ borrow, into })) {
              const target = targets.get(name);
              if (target) expect(t, `${what}: ${name} is yielded as its target`).toBe(target);
              else kept.set(name, borrow ? t.clone() : t);
            }
            problems = compareModels(
              model.map(([n]) => [n, targets.get(n) ?? kept.get(n)!]),
              model,
            );
          }
          const all = (await ctx.world.allGatherObject(problems)) as string[][];
          for (const [r, p] of all.entries()) expect(p, `${what}: rank ${r}`).toEqual([]);
        };

        await sync('first sync');
        if (layout === 'nodes, packed' && FOLLOWERS.includes(ctx.rank)) {
          // A relay's follower asks for each entry to land in its target, which a store between processes does.
          const wished = new Set(counts.landWishes!.map((t) => t.buffer));
          for (const [name, target] of targets) {
            if (target.nbytes > 0) expect(wished.has(target.buffer), `${name} landed in place`).toBe(true);
          }
        }
        if (onNodes && ctx.rank === 5) {
          // Alone on node c, rank 5 takes each bucket from a sender on another node in pieces (pieces.ts):
          // 'layer.0.big', split over four buckets, comes in pieces of its own, straight into its target.
          const wished = new Set(counts.landWishes!.map((t) => t.buffer));
          expect(wished.has(targets.get('layer.0.big')!.buffer), 'layer.0.big landed in place').toBe(true);
        }
        // With node memory a follower copies each entry from the relay's: it receives no payload message.
        if (layout === 'nodes, packed, node memory' && FOLLOWERS.includes(ctx.rank))
          expect(counts.landWishes).toEqual([]);
        // 'layer.0.big' is split over four buckets; 'scale' (left out) shares the first with it.
        model = changedModel(model, ['layer.0.big', 'scale', 'layer.1.bias'], 2);
        await sync('second sync: three tensors changed');
        await sync('third sync: nothing changed');
        if (delta && engine.role === 'receiver') expect(engine.lastSync?.skippedBuckets).toBeGreaterThan(0);
        await ctx.world.barrier();
        if (onNodes) group.destroy();
      },
    );
  }
}

/** The names with a piece in the bucket that holds the first piece of `name`. */
async function bucketOf(name: string): Promise<string[]> {
  for await (const b of planBuckets(testModel(1), TEST_BUCKET_BYTES, 'test')) {
    if (b.chunks.some((c) => c.name === name && c.chunkStart === 0)) return b.chunks.map((c) => c.name);
  }
  throw new Error(`${name} is not in the model`);
}

interface Refusal {
  layout: Layout;
  rank: number;
  name: string;
  target: () => Tensor;
  error: RegExp;
}

const REFUSALS: Refusal[] = [
  {
    layout: 'nodes, packed, node memory',
    rank: 3,
    name: 'layer.1.bias',
    target: () => Tensor.zeros([30], 'bfloat16'),
    error:
      /into gives 'layer\.1\.bias' as bfloat16\[30\], but the sync's 'layer\.1\.bias' is bfloat16\[31\]: nothing of bucket \d+ was written/,
  },
  {
    layout: 'one node, lent',
    rank: 5,
    name: 'layer.0.big',
    target: () => Tensor.zeros([112, 64], 'float32'),
    error:
      /into gives 'layer\.0\.big' as float32\[112,64\], but the sync's 'layer\.0\.big' is bfloat16\[112,64\]: nothing of bucket \d+ was written/,
  },
  {
    layout: 'nodes, packed',
    rank: 2,
    name: 'embed.weight',
    target: () => Tensor.zeros([3, 5], 'float32').transpose(0, 1),
    error:
      /into gives 'embed\.weight' as float32\[5,3\] on cpu, not contiguous: the engine loads only contiguous host tensors/,
  },
];

/** A sync in which `refusal.rank` gives a target that does not match: each rank's outcome, and the refuser's bucket. */
async function refusedSync(ctx: RankContext, refusal: Refusal, tag: number) {
  const group = groupFor(ctx, refusal.layout, { bytes: 0 });
  const engine = new WeightSyncEngine(group, {
    senders: SENDERS,
    receivers: RECEIVERS,
    bucketBytes: TEST_BUCKET_BYTES,
    tag,
    timeoutMs: 3000,
  });
  const model = testModel(1);
  const targets = targetsLike(model);
  if (ctx.rank === refusal.rank) targets.set(refusal.name, refusal.target());
  const receive = async () => {
    for await (const _ of engine.receive({ into: targets }));
  };
  const outcome = await (engine.role === 'sender' ? engine.send(model) : receive()).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  await ctx.world.barrier();
  if (group !== ctx.world) group.destroy();
  return { outcome, targets };
}

rankTest(
  'into: a target of another dtype or shape, or not contiguous, fails the sync before its bucket is written',
  { worldSize: NODES.length },
  async (ctx) => {
    for (const [i, refusal] of REFUSALS.entries()) {
      const { outcome, targets } = await refusedSync(ctx, refusal, 0x10000 * (i + 1));
      if (SENDERS.includes(ctx.rank)) expect(outcome).toMatch(/receiver \d failed/);
      if (ctx.rank !== refusal.rank) continue;
      expect(outcome).toMatch(refusal.error);
      for (const name of await bucketOf(refusal.name)) {
        const bytes = targets.get(name)?.contiguous().bytes() ?? new Uint8Array(0);
        expect(
          bytes.every((b) => b === 0),
          `${name} shares the refused bucket`,
        ).toBe(true);
      }
    }
  },
);

rankTest('into: anything but a Map or a function is a TypeError', { worldSize: 2 }, async (ctx) => {
  const engine = new WeightSyncEngine(ctx.world, { senders: [0], receivers: [1], bucketBytes: 4096 });
  if (engine.role === 'sender') return;
  const bad = engine.receive({ into: { w: Tensor.zeros([1]) } as never });
  await expect(bad.next()).rejects.toThrow(
    /options\.into must be a Map of tensor name to Tensor or a function/,
  );
});
