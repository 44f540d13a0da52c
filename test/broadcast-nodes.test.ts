/**
 * The two-level broadcast that a store spanning nodes gets for a large
 * tensor (store-backend/broadcast-nodes.ts), on thread ranks whose memory
 * store is wrapped to say which "node" each rank is on and to count the bytes
 * that cross between nodes (fixtures/node-store.ts). Results must be exact
 * from every kind of root, and the tensor may cross to each other node once.
 */
import { expect } from 'vitest';
import { CollectiveMismatchError, type RankContext, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { groupOnNodes } from './fixtures/node-store.ts';

/** Six ranks on three nodes of 2, 3 and 1 ranks. */
const NODE_OF = ['a', 'a', 'b', 'b', 'b', 'c'];
const NODES = 3;
/** Over the 64 KiB that small tensors stay flat up to. */
const LARGE = 30_000;

const rootValue = (src: number, i: number) => src * 1000 + (i % 997);

/** What rank `rank` passes to a broadcast from `src`: the root its values, the others stale ones. */
function tensorFor(ctx: RankContext, src: number, count: number): Tensor {
  return Tensor.fromArray(
    Array.from({ length: count }, (_, i) => (ctx.rank === src ? rootValue(src, i) : -1)),
    [count],
    'float32',
  );
}

function expectFrom(t: Tensor, src: number, what: string): void {
  const got = t.toArray() as number[];
  const wrong = got.findIndex((v, i) => v !== rootValue(src, i));
  expect(wrong, `${what}: element ${wrong} is ${got[wrong]}`).toBe(-1);
}

rankTest(
  'every rank gets the root’s tensor, small and large, whichever rank is the root',
  { worldSize: 6 },
  async (ctx) => {
    const { group } = groupOnNodes(ctx, NODE_OF, { bytes: 0 });
    // A node's lowest rank, another rank of a node, a rank of the largest node, a rank alone on its node.
    for (const src of [0, 1, 3, 5]) {
      for (const count of [5, LARGE]) {
        const t = tensorFor(ctx, src, count);
        await group.broadcast(t, { src });
        expectFrom(t, src, `${count} elements from rank ${src}`);
      }
    }
    group.destroy();
  },
);

rankTest(
  'a large tensor crosses to each other node once, from the root alone',
  { worldSize: 6 },
  async (ctx) => {
    for (const src of [1, 3]) {
      const crossed = { bytes: 0 };
      const { group } = groupOnNodes(ctx, NODE_OF, crossed);
      const t = tensorFor(ctx, src, LARGE);
      await group.broadcast(t, { src });
      expectFrom(t, src, `from rank ${src}`);
      // A flat broadcast from rank 1 would send it to the 4 ranks of nodes b and c.
      expect(crossed.bytes, `rank ${ctx.rank}, root ${src}`).toBe(
        ctx.rank === src ? (NODES - 1) * t.nbytes : 0,
      );
      group.destroy();
    }
  },
);

rankTest('with the checks off, too', { worldSize: 6 }, async (ctx) => {
  const crossed = { bytes: 0 };
  const { backend } = groupOnNodes(ctx, NODE_OF, crossed);
  const src = 4;
  const t = tensorFor(ctx, src, LARGE);
  await backend.broadcast({ seq: 0, signature: 'broadcast', timeoutMs: 10_000, checks: false }, t, src);
  expectFrom(t, src, 'checks off');
  expect(crossed.bytes).toBe(ctx.rank === src ? (NODES - 1) * t.nbytes : 0);
  backend.destroy();
});

rankTest(
  'a rank whose tensor is small while the others’ are large fails every rank, none hangs',
  { worldSize: 6 },
  async (ctx) => {
    const { group } = groupOnNodes(ctx, NODE_OF, { bytes: 0 });
    const t = tensorFor(ctx, 0, ctx.rank === 4 ? 5 : LARGE);
    const outcome = await group.broadcast(t, { src: 0 }).then(
      () => 'completed',
      (error: unknown) => error,
    );
    expect(outcome).toBeInstanceOf(CollectiveMismatchError);
    group.destroy();
  },
);
