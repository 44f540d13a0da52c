/**
 * reduceScatter and reduceScatterTensor on a store spanning nodes (thread
 * ranks whose memory store says which "node" each rank is on and counts the
 * bytes that cross between nodes, fixtures/node-store.ts). A small output:
 * each peer off the rank's node is sent its own slice (not the whole input).
 * A large one (over 64 KiB, not avg): each node sends a slice's owner one
 * partial result, the reducing spread over the node's ranks. Results stay
 * exact for any output shape.
 */
import { expect } from 'vitest';
import { Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';
import { groupOnNodes } from './fixtures/node-store.ts';
import { expectReduced, inputOf } from './fixtures/reduce-scatter-checks.ts';

/** Six ranks on three nodes of 2, 3 and 1 ranks. */
const NODE_OF = ['a', 'a', 'b', 'b', 'b', 'c'];
/**
 * Partials each rank sends in two levels: slice q's reducer on a node is the rank at q's position within
 * q's own node, wrapped around the node's ranks (node a: 0 for 2, 4, 5 and 1 for 3; node b: 2 for 0 and
 * 5, 3 for 1; node c: 5 for all five).
 */
const PARTIALS_SENT = [3, 1, 2, 1, 0, 5];

rankTest(
  'reduceScatterTensor: exact for any shape; one slice per peer off the node, or one partial per slice owner and node',
  { worldSize: 6 },
  async (ctx) => {
    const remotePeers = NODE_OF.filter((node) => node !== NODE_OF[ctx.rank]).length;
    // 3 and 10,000 float32 (40 KB) stay flat; 20,000 (80 KB) take two levels, but not avg.
    for (const shape of [[3], [4, 2500], [4, 5000]]) {
      for (const op of ['sum', 'max', 'avg'] as const) {
        const count = shape.reduce((a, b) => a * b, 1);
        const crossed = { bytes: 0 };
        const { group } = groupOnNodes(ctx, NODE_OF, crossed);
        const output = Tensor.empty(shape, 'float32');
        await group.reduceScatterTensor(output, inputOf(ctx, count), { op });
        expectReduced(ctx, output, op, `${op} into [${shape}]`);
        const twoLevels = output.nbytes > 64 << 10 && op !== 'avg';
        // The whole input to each of them was worldSize times the flat figure.
        const slices = twoLevels ? PARTIALS_SENT[ctx.rank] : remotePeers;
        expect(crossed.bytes, `${op} into [${shape}], rank ${ctx.rank}`).toBe(slices * output.nbytes);
        group.destroy();
      }
    }
  },
);

rankTest('reduceScatter of a list of inputs takes the same two levels', { worldSize: 6 }, async (ctx) => {
  const count = 20_000;
  const crossed = { bytes: 0 };
  const { group } = groupOnNodes(ctx, NODE_OF, crossed);
  const whole = inputOf(ctx, count);
  const inputs = Array.from({ length: ctx.worldSize }, (_, p) => whole.narrow(0, p * count, count));
  const output = Tensor.empty([count], 'float32');
  await group.reduceScatter(output, inputs);
  expectReduced(ctx, output, 'sum', 'reduceScatter');
  expect(crossed.bytes).toBe(PARTIALS_SENT[ctx.rank] * output.nbytes);
  group.destroy();
});
