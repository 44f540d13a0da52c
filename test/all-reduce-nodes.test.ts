/**
 * The two-level allReduce that a store spanning nodes gets (store-backend/
 * all-reduce-nodes.ts), on thread ranks: their memory store, wrapped to say
 * which "node" each rank is on and to count the bytes that cross between
 * nodes. Results must be exact, and only the node leaders' slices may cross.
 */
import { expect } from 'vitest';
import { type RankContext, type ReduceOp, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import type { ThreadGroup } from '../src/thread-group/thread-group.ts';
import { groupOnNodes } from './fixtures/node-store.ts';

/** Six ranks on three nodes of 2, 3 and 1 ranks. */
const NODE_OF = ['a', 'a', 'b', 'b', 'b', 'c'];
const NODES = 3;

function groupOver(ctx: RankContext, crossed: { bytes: number }): ThreadGroup {
  return groupOnNodes(ctx, NODE_OF, crossed).group;
}

const inputValue = (rank: number, i: number) => ((rank * 7 + i * 3) % 11) - 5;

function reference(op: ReduceOp, worldSize: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => {
    const all = Array.from({ length: worldSize }, (_, r) => inputValue(r, i));
    if (op === 'max') return Math.max(...all);
    const sum = all.reduce((a, b) => a + b, 0);
    return op === 'avg' ? sum / worldSize : sum;
  });
}

rankTest('matches the reference for sum, max and avg, small and large', { worldSize: 6 }, async (ctx) => {
  const crossed = { bytes: 0 };
  const group = groupOver(ctx, crossed);
  // 5 elements stay flat (latency), 30,000 take the two levels: the leaders' reduce-scatter + all-gather.
  for (const count of [5, 30_000]) {
    for (const op of ['sum', 'max', 'avg'] as const) {
      const t = Tensor.fromArray(
        Array.from({ length: count }, (_, i) => inputValue(ctx.rank, i)),
        [count],
        'float32',
      );
      await group.allReduce(t, { op });
      const want = reference(op, ctx.worldSize, count);
      const got = t.toArray() as number[];
      const wrong = got.findIndex((v, i) => Math.abs(v - want[i]) > 1e-5);
      expect(wrong, `${op} of ${count}: element ${wrong}`).toBe(-1);
    }
  }
  group.destroy();
});

rankTest('only the leaders send across nodes, each 2(L-1)/L of the tensor', { worldSize: 6 }, async (ctx) => {
  const crossed = { bytes: 0 };
  const group = groupOver(ctx, crossed);
  const count = 3 * 10_000;
  const t = Tensor.full([count], ctx.rank, 'float32');
  await group.allReduce(t);
  expect(t.toArray()[count - 1]).toBe(15);
  const leader = NODE_OF.indexOf(NODE_OF[ctx.rank]) === ctx.rank;
  // Reduce-scatter then all-gather among 3 leaders: 2 slices of a third out, twice.
  expect(crossed.bytes).toBe(leader ? ((2 * (NODES - 1)) / NODES) * t.nbytes : 0);
  group.destroy();
});
