import { describe, expect } from 'vitest';
import { Tensor } from '../src/index.ts';
import { rankTest } from '../src/testing/index.ts';

rankTest('averages gradients', { worldSize: 4 }, async (ctx) => {
  const g = Tensor.full([3], ctx.rank);
  await ctx.world.allReduce(g, { op: 'avg' });
  expect(g.toArray()).toEqual([1.5, 1.5, 1.5]);
});

describe('in a describe block', () => {
  const size = 2;
  rankTest('sees the block variables', { worldSize: size }, async (ctx) => {
    expect(ctx.worldSize).toBe(size);
  });
});
