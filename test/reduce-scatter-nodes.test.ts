/**
 * reduceScatterTensor on a store spanning nodes (thread ranks whose memory
 * store says which "node" each rank is on and counts the bytes that cross
 * between nodes, fixtures/node-store.ts): each peer off the rank's node is
 * sent its own slice of the input, not the whole input, and the results stay
 * exact for any output shape.
 */
import { expect } from 'vitest';
import { Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { groupOnNodes } from './fixtures/node-store.ts';

/** Six ranks on three nodes of 2, 3 and 1 ranks. */
const NODE_OF = ['a', 'a', 'b', 'b', 'b', 'c'];
const inputValue = (rank: number, i: number) => ((rank * 5 + i * 7) % 13) - 6;

rankTest(
  'exact, sum and max, any output shape; each peer off the node gets its slice alone',
  { worldSize: 6 },
  async (ctx) => {
    const n = ctx.worldSize;
    const remotePeers = NODE_OF.filter((node) => node !== NODE_OF[ctx.rank]).length;
    for (const shape of [[3], [4, 2500]]) {
      const count = shape.reduce((a, b) => a * b, 1);
      for (const op of ['sum', 'max'] as const) {
        const crossed = { bytes: 0 };
        const { group } = groupOnNodes(ctx, NODE_OF, crossed);
        const input = Tensor.fromArray(
          Array.from({ length: n * count }, (_, i) => inputValue(ctx.rank, i)),
          [n * count],
          'float32',
        );
        const output = Tensor.empty(shape, 'float32');
        await group.reduceScatterTensor(output, input, { op });
        const got = output.toArray() as number[];
        const wrong = got.findIndex((v, j) => {
          const all = Array.from({ length: n }, (_, r) => inputValue(r, ctx.rank * count + j));
          return v !== (op === 'max' ? Math.max(...all) : all.reduce((a, b) => a + b, 0));
        });
        expect(wrong, `${op} into [${shape}]: element ${wrong}`).toBe(-1);
        // The whole input to each of them was n times this.
        expect(crossed.bytes, `${op} into [${shape}]`).toBe(remotePeers * output.nbytes);
        group.destroy();
      }
    }
  },
);
