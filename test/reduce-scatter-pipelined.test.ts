/**
 * reduceScatter and reduceScatterTensor of a large host input where the
 * store copies values (store-backend/reduce-scatter-pipelined.ts): each peer
 * is sent its part alone, in chunks, and each rank reduces its own part
 * chunk by chunk. On thread ranks whose memory store takes landing wishes
 * (as the stores between processes and nodes do, fixtures/node-store.ts),
 * with chunks set small so every part is cut into many; then on real
 * processes, whose file store copies through its arena.
 */
import { expect, it } from 'vitest';
import { CollectiveMismatchError, launchProcesses, type RankContext, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { pipelineOptions } from '../src/thread-group/store-backend/reduce-scatter-pipelined.ts';
import { groupOnNodes, type NodeCounts } from './fixtures/node-store.ts';
import { expectReduced, inputOf } from './fixtures/reduce-scatter-checks.ts';

/** 1000 float32s a chunk. */
const CHUNK_BYTES = 4000;
/** Elements of each rank's output: 3 of them make 2 MiB of float32 input and more, cut unevenly. */
const COUNT = 180_007;
function groupOver(ctx: RankContext, nodeOf: string[], counts: NodeCounts) {
  pipelineOptions.chunkBytes = CHUNK_BYTES;
  counts.landWishes = [];
  return groupOnNodes(ctx, nodeOf, counts).group;
}

for (const [layout, nodeOf] of [
  ['one node', ['a', 'a', 'a']],
  ['one rank per node', ['a', 'b', 'c']],
] as const) {
  rankTest(
    `${layout}: reduceScatterTensor and reduceScatter exact, each peer sent its part alone in chunks`,
    { worldSize: 3 },
    async (ctx) => {
      for (const dtype of ['float32', 'int32'] as const) {
        for (const op of ['sum', 'max', 'avg'] as const) {
          if (op === 'avg' && dtype === 'int32') continue;
          const counts = { bytes: 0, readInPlace: 0, values: 0 };
          const group = groupOver(ctx, [...nodeOf], counts);
          const input = inputOf(ctx, COUNT, dtype);
          const output = Tensor.empty([COUNT], dtype);
          await group.reduceScatterTensor(output, input, { op });
          expectReduced(ctx, output, op, `${layout}, reduceScatterTensor ${op} ${dtype}`);
          // The two peers' parts, nothing more, in chunks of 1000 elements: 181 each.
          expect(counts.readInPlace).toBe((2 * input.nbytes) / 3);
          expect(counts.values).toBe(2 * Math.ceil(COUNT / 1000));
          const parts = Array.from({ length: 3 }, (_, p) => input.narrow(0, p * COUNT, COUNT));
          const listed = Tensor.empty([COUNT], dtype);
          await group.reduceScatter(listed, parts, { op });
          expectReduced(ctx, listed, op, `${layout}, reduceScatter ${op} ${dtype}`);
          group.destroy();
        }
      }
    },
  );
}

rankTest('in place: the output a slice of the input', { worldSize: 3 }, async (ctx) => {
  const group = groupOver(ctx, ['a', 'a', 'a'], { bytes: 0 });
  const input = inputOf(ctx, COUNT, 'float32');
  const own = input.narrow(0, ctx.rank * COUNT, COUNT);
  await group.reduceScatterTensor(own, input);
  expectReduced(ctx, own, 'sum', 'in place');
  group.destroy();
});

rankTest(
  'a rank whose input is smaller than the others’ fails every rank, none hangs',
  { worldSize: 3 },
  async (ctx) => {
    const group = groupOver(ctx, ['a', 'a', 'a'], { bytes: 0 });
    const count = ctx.rank === 1 ? COUNT - 1000 : COUNT;
    const outcome = await group
      .reduceScatterTensor(Tensor.empty([count], 'float32'), inputOf(ctx, count, 'float32'))
      .then(
        () => 'completed',
        (error: unknown) => error,
      );
    expect(outcome).toBeInstanceOf(CollectiveMismatchError);
    group.destroy();
  },
);

it('2 processes of one node: exact through the file store', async () => {
  const entry = new URL('./fixtures/reduce-scatter-rank.ts', import.meta.url);
  const results = await launchProcesses<number[]>(entry, { nproc: 2, timeoutMs: 60_000 });
  // Each rank's wrong element index for reduceScatterTensor and reduceScatter (-1: none).
  expect(results).toEqual([
    [-1, -1],
    [-1, -1],
  ]);
});
