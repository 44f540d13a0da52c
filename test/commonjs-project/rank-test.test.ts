/**
 * rankTest in a project whose package.json says "type": "commonjs" (what
 * `npm init -y` writes): the test file imports and exports nothing, which
 * esbuild took for CommonJS when it bundled the file for the rank threads,
 * and every rank failed loading the library ("Class extends value undefined").
 */
import { expect } from 'vitest';
import { Tensor } from '../../src/index.ts';
import { rankTest } from '../../src/testing/index.ts';

rankTest('averages gradients in a commonjs project', { worldSize: 2 }, async (ctx) => {
  const g = Tensor.full([3], ctx.rank);
  await ctx.world.allReduce(g, { op: 'avg' });
  expect(g.toArray()).toEqual([0.5, 0.5, 0.5]);
});
