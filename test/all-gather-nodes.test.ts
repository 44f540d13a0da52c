/**
 * The two-level allGather that a store spanning nodes gets for large pieces
 * (store-backend/all-gather-nodes.ts), on thread ranks whose memory store
 * says which "node" each rank is on and counts the bytes that cross between
 * nodes (fixtures/node-store.ts). Results must be exact, and each piece may
 * cross to each other node once.
 */
import { expect } from 'vitest';
import { CollectiveMismatchError, Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { groupOnNodes } from './fixtures/node-store.ts';

/** Six ranks on three nodes of 2, 3 and 1 ranks. */
const NODE_OF = ['a', 'a', 'b', 'b', 'b', 'c'];
const NODES = 3;
const pieceValue = (rank: number, i: number) => rank * 100_000 + i;

function pieceOf(rank: number, shape: readonly number[]): Tensor {
  const count = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(
    Array.from({ length: count }, (_, i) => pieceValue(rank, i)),
    shape,
    'float32',
  );
}

function expectPiece(got: Tensor, p: number, what: string): void {
  const values = got.toArray() as number[];
  const wrong = values.findIndex((v, i) => v !== pieceValue(p, i));
  expect(wrong, `${what}: rank ${p}'s element ${wrong} is ${values[wrong]}`).toBe(-1);
}

rankTest(
  'allGather and allGatherInto are exact, small pieces and large; a large piece crosses to each other node once',
  { worldSize: 6 },
  async (ctx) => {
    const n = ctx.worldSize;
    // 4 elements stay flat (latency); 4 x 5,000 float32 (80 KB) take the two levels.
    for (const shape of [[4], [4, 5_000]]) {
      const count = shape.reduce((a, b) => a * b, 1);
      const crossed = { bytes: 0 };
      const { group } = groupOnNodes(ctx, NODE_OF, crossed);
      const input = pieceOf(ctx.rank, shape);
      const outputs = Array.from({ length: n }, () => Tensor.full(shape, -1, 'float32'));
      await group.allGather(outputs, input);
      for (let p = 0; p < n; p++) expectPiece(outputs[p], p, `allGather of [${shape}]`);
      const into = Tensor.full([n * count], -1, 'float32');
      await group.allGatherInto(into, input);
      for (let p = 0; p < n; p++)
        expectPiece(into.narrow(0, p * count, count), p, `allGatherInto of [${shape}]`);
      if (count > 4) {
        // Twice, to the other two nodes' lowest ranks; a flat allGather sends it to every rank off the node.
        expect(crossed.bytes, `rank ${ctx.rank}`).toBe(2 * (NODES - 1) * input.nbytes);
      }
      group.destroy();
    }
  },
);

rankTest(
  'a rank whose piece is small while the others’ are large fails every rank, none hangs',
  { worldSize: 6 },
  async (ctx) => {
    const { group } = groupOnNodes(ctx, NODE_OF, { bytes: 0 });
    const shape = ctx.rank === 4 ? [4] : [4, 5_000];
    const outputs = Array.from({ length: ctx.worldSize }, () => Tensor.empty(shape, 'float32'));
    const outcome = await group.allGather(outputs, pieceOf(ctx.rank, shape)).then(
      () => 'completed',
      (error: unknown) => error,
    );
    expect(outcome).toBeInstanceOf(CollectiveMismatchError);
    group.destroy();
  },
);
