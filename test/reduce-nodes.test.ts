/**
 * The two-level reduce that a store spanning nodes gets for a large host
 * tensor (store-backend/reduce-nodes.ts), on thread ranks whose memory store
 * says which "node" each rank is on and counts the bytes that cross between
 * nodes (fixtures/node-store.ts). The root's result must be exact, the
 * others' tensors untouched, and each other node may send the root one
 * tensor.
 */
import { expect } from 'vitest';
import { type RankContext, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { groupOnNodes } from './fixtures/node-store.ts';

/** Six ranks on three nodes of 2, 3 and 1 ranks. */
const NODE_OF = ['a', 'a', 'b', 'b', 'b', 'c'];
const LARGE = 30_000;
const inputValue = (rank: number, i: number) => ((rank * 7 + i * 3) % 11) - 5;

function inputOf(ctx: RankContext, count: number): Tensor {
  return Tensor.fromArray(
    Array.from({ length: count }, (_, i) => inputValue(ctx.rank, i)),
    [count],
    'float32',
  );
}

function expected(op: 'sum' | 'max' | 'avg', worldSize: number, i: number): number {
  const all = Array.from({ length: worldSize }, (_, r) => inputValue(r, i));
  if (op === 'max') return Math.max(...all);
  const sum = all.reduce((a, b) => a + b, 0);
  return op === 'avg' ? sum / worldSize : sum;
}

rankTest(
  'the root gets the exact reduction, small and large, sum, max and avg, whichever rank it is; the others keep their tensors',
  { worldSize: 6 },
  async (ctx) => {
    const { group } = groupOnNodes(ctx, NODE_OF, { bytes: 0 });
    for (const dst of [0, 1, 3, 5]) {
      for (const count of [5, LARGE]) {
        for (const op of ['sum', 'max', 'avg'] as const) {
          const t = inputOf(ctx, count);
          await group.reduce(t, { dst, op });
          const got = t.toArray() as number[];
          const wrong = got.findIndex((v, i) =>
            ctx.rank === dst
              ? Math.abs(v - expected(op, ctx.worldSize, i)) > 1e-5
              : v !== inputValue(ctx.rank, i),
          );
          expect(wrong, `${op} of ${count} to ${dst}, rank ${ctx.rank}: element ${wrong}`).toBe(-1);
        }
      }
    }
    group.destroy();
  },
);

rankTest('each other node sends the root one tensor: its partial sum', { worldSize: 6 }, async (ctx) => {
  const dst = 1;
  const crossed = { bytes: 0 };
  const { group } = groupOnNodes(ctx, NODE_OF, crossed);
  const t = inputOf(ctx, LARGE);
  await group.reduce(t, { dst });
  // Ranks 2 and 5 reduce nodes b and c; a flat reduce had ranks 2, 3, 4 and 5 each send the root theirs.
  expect(crossed.bytes, `rank ${ctx.rank}`).toBe(ctx.rank === 2 || ctx.rank === 5 ? t.nbytes : 0);
  group.destroy();
});
