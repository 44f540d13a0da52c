/**
 * The allReduce algorithms for ranks on several nodes (store-backend/
 * all-reduce-pipelined.ts and all-reduce-nodes.ts), on thread ranks: their
 * memory store, wrapped to say which "node" each rank is on and to count the
 * bytes that cross between nodes and those set to be read in place. One rank per node takes the pipelined
 * reduce-scatter + all-gather, nodes of equal size the rails, uneven nodes
 * the leaders (whose step among themselves is the pipelined one). Chunks are
 * set small so every tensor is cut into many; results must be exact on every
 * rank, at sizes on both sides of each switch.
 */
import { expect } from 'vitest';
import { type RankContext, type ReduceOp, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { ONE_EXCHANGE_MAX_BYTES } from '../src/thread-group/store-backend/all-reduce.ts';
import { chunksOf } from '../src/thread-group/store-backend/all-reduce-pipelined.ts';
import { pipelineOptions } from '../src/thread-group/store-backend/reduce-scatter-pipelined.ts';
import type { ThreadGroup } from '../src/thread-group/thread-group.ts';
import { groupOnNodes, type NodeCounts } from './fixtures/node-store.ts';

/** Elements of a chunk in these tests: 1000 float32s. */
const CHUNK_BYTES = 4000;
/** The largest tensor that takes one exchange, in float32 elements. */
const FLAT = ONE_EXCHANGE_MAX_BYTES / 4;
/** Element counts: tiny, both sides of the one-exchange switch, and ones that cut into uneven chunks. */
const COUNTS = [1, 5, FLAT, FLAT + 1, 3 * 2000 + 7, 30_011];

function groupOver(ctx: RankContext, nodeOf: string[], crossed: NodeCounts): ThreadGroup {
  pipelineOptions.chunkBytes = CHUNK_BYTES;
  return groupOnNodes(ctx, nodeOf, crossed).group;
}

const inputValue = (rank: number, i: number) => ((rank * 7 + i * 3) % 11) - 5;

function reference(op: ReduceOp, worldSize: number, i: number): number {
  const all = Array.from({ length: worldSize }, (_, r) => inputValue(r, i));
  if (op === 'max') return Math.max(...all);
  const sum = all.reduce((a, b) => a + b, 0);
  return op === 'avg' ? sum / worldSize : sum;
}

/** Every op and count on `nodeOf`'s layout, each result checked element by element. */
async function checkLayout(ctx: RankContext, nodeOf: string[]): Promise<void> {
  const group = groupOver(ctx, nodeOf, { bytes: 0 });
  for (const count of COUNTS) {
    for (const op of ['sum', 'max', 'avg'] as const) {
      for (const dtype of ['float32', 'int32'] as const) {
        if (op === 'avg' && dtype === 'int32') continue;
        const values = Array.from({ length: count }, (_, i) => inputValue(ctx.rank, i));
        const t = Tensor.fromArray(values, [count], dtype);
        await group.allReduce(t, { op });
        const got = t.toArray() as number[];
        const wrong = got.findIndex((v, i) => Math.abs(v - reference(op, ctx.worldSize, i)) > 1e-6);
        expect(wrong, `${op} of ${count} ${dtype}: element ${wrong} is ${got[wrong]}`).toBe(-1);
      }
    }
  }
  group.destroy();
}

rankTest('one rank on each of 2 nodes: exact at every size, in many chunks', { worldSize: 2 }, (ctx) =>
  checkLayout(ctx, ['a', 'b']),
);

rankTest('one rank on each of 3 nodes: exact at every size, in many chunks', { worldSize: 3 }, (ctx) =>
  checkLayout(ctx, ['a', 'b', 'c']),
);

rankTest('2 nodes of 2 ranks (rails): exact at every size', { worldSize: 4 }, (ctx) =>
  checkLayout(ctx, ['a', 'a', 'b', 'b']),
);

rankTest('3 nodes of 2 ranks (rails), listed out of order: exact at every size', { worldSize: 6 }, (ctx) =>
  checkLayout(ctx, ['a', 'b', 'c', 'a', 'b', 'c']),
);

rankTest('uneven nodes of 1 and 2 ranks (leaders): exact at every size', { worldSize: 3 }, (ctx) =>
  checkLayout(ctx, ['a', 'b', 'b']),
);

rankTest(
  'one rank per node sends 2(n-1)/n of the tensor across, in chunks',
  { worldSize: 3 },
  async (ctx) => {
    const crossed = { bytes: 0 };
    const group = groupOver(ctx, ['a', 'b', 'c'], crossed);
    const count = 3 * 10_000;
    const t = Tensor.full([count], ctx.rank, 'float32');
    await group.allReduce(t);
    expect(t.toArray()[count - 1]).toBe(3);
    expect(crossed.bytes).toBe((2 * 2 * t.nbytes) / 3);
    // 10,000 elements a slice, 1000 a chunk.
    expect(chunksOf(t, 3, ctx.rank, CHUNK_BYTES)).toHaveLength(10);
    group.destroy();
  },
);

rankTest('rails: each rank sends 2(L-1)/L of its 1/m slice across', { worldSize: 4 }, async (ctx) => {
  const crossed = { bytes: 0 };
  const group = groupOver(ctx, ['a', 'a', 'b', 'b'], crossed);
  const count = 4 * 10_000;
  const t = Tensor.full([count], ctx.rank, 'float32');
  await group.allReduce(t);
  expect(t.toArray()[0]).toBe(6);
  expect(t.toArray()[count - 1]).toBe(6);
  // Slice of 1/2 per rank, allReduced between 2 nodes: half of it out, twice.
  expect(crossed.bytes).toBe(t.nbytes / 2);
  group.destroy();
});

rankTest(
  "a reduction's inputs are set to be read in place, what lands in the ranks' tensors is not",
  { worldSize: 4 },
  async (ctx) => {
    for (const [layout, nodeOf] of [
      ['rails', ['a', 'a', 'b', 'b']],
      ['leaders', ['a', 'b', 'b', 'b']],
      ['one rank per node', ['a', 'b', 'c', 'd']],
      ['one node', ['a', 'a', 'a', 'a']],
    ] as const) {
      const counts: NodeCounts = { bytes: 0 };
      const group = groupOver(ctx, [...nodeOf], counts);
      const count = 4 * 10_000;
      const t = Tensor.full([count], ctx.rank, 'float32');
      await group.allReduce(t);
      expect(t.toArray()[count - 1], layout).toBe(6);
      const quarter = t.nbytes / 4;
      // Rails: a local peer's half, then a quarter to the rail's peer, are reduced; their results land.
      // Leaders (0 alone, 1 leading 2 and 3): the leaders reduce half of the tensor each and send the
      // other half's result back; the members' whole tensors are reduced by 1, whose result lands in
      // them. One rank per node, and one node (the flat reduce-scatter + all-gather): 3/4 of the tensor
      // goes to be reduced, each rank's quarter comes back.
      // The fingerprints are empty values of their own.
      const leaders = [
        { readInPlace: 2 * quarter, landable: 2 * quarter },
        { readInPlace: 2 * quarter, landable: 2 * quarter + 4 * quarter },
        { readInPlace: 4 * quarter, landable: 0 },
        { readInPlace: 4 * quarter, landable: 0 },
      ];
      const expected = {
        rails: { readInPlace: 3 * quarter, landable: 3 * quarter },
        leaders: leaders[ctx.rank],
        'one rank per node': { readInPlace: 3 * quarter, landable: quarter },
        'one node': { readInPlace: 3 * quarter, landable: quarter },
      }[layout];
      expect({ readInPlace: counts.readInPlace, landable: counts.landable }, layout).toEqual(expected);
      group.destroy();
    }
  },
);

rankTest('chunks cover each slice exactly, none empty', { worldSize: 1 }, () => {
  for (const numel of [0, 1, 7, 1000, 1001, 29_999]) {
    for (const n of [1, 2, 3, 5]) {
      const t = Tensor.zeros([numel], 'float32');
      const all = Array.from({ length: n }, (_, p) => chunksOf(t, n, p, CHUNK_BYTES)).flat();
      expect(all.every(([s, e]) => e > s && e - s <= CHUNK_BYTES / 4)).toBe(true);
      expect(all.reduce((sum, [s, e]) => sum + e - s, 0)).toBe(numel);
      for (let i = 1; i < all.length; i++) expect(all[i][0]).toBe(all[i - 1][1]);
    }
  }
});
