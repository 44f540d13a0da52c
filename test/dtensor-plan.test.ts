/** The pure parts of redistribute: chunk spans and the order of per-mesh-dim steps. */
import { describe, expect, it } from 'vitest';
import { chunkSpan } from '../src/dtensor/local-block.ts';
import { formatPlacement, type Placement } from '../src/dtensor/placement.ts';
import { planRedistribute } from '../src/dtensor/redistribute-plan.ts';
import { Partial, Replicate, Shard } from '../src/index.ts';

const plan = (from: Placement[], to: Placement[]) =>
  planRedistribute(from, to, 'test').map(
    (s) => `${s.meshDim}: ${formatPlacement(s.from)} -> ${formatPlacement(s.to)}`,
  );

describe('chunkSpan', () => {
  it('follows torch.chunk: ceil(n / k) per piece, trailing pieces short or empty', () => {
    const spans = (n: number, k: number) => Array.from({ length: k }, (_, i) => chunkSpan(n, k, i));
    expect(spans(5, 4).map((s) => [s.offset, s.length])).toEqual([
      [0, 2],
      [2, 2],
      [4, 1],
      [5, 0],
    ]);
    expect(spans(2, 4).map((s) => s.length)).toEqual([1, 1, 0, 0]);
    expect(spans(0, 3).map((s) => s.length)).toEqual([0, 0, 0]);
  });
});

describe('planRedistribute', () => {
  it('takes one mesh dimension at a time with the conversion matrix', () => {
    expect(plan([Shard(0)], [Replicate()])).toEqual(['0: Shard(0) -> Replicate()']);
    expect(plan([Shard(0)], [Shard(1)])).toEqual(['0: Shard(0) -> Shard(1)']);
    expect(plan([Partial()], [Shard(1)])).toEqual(['0: Partial(sum) -> Shard(1)']);
    expect(plan([Replicate(), Shard(0)], [Replicate(), Shard(0)])).toEqual([]);
  });

  it('goes through Replicate between two Partial ops', () => {
    expect(plan([Partial('sum')], [Partial('max')])).toEqual([
      '0: Partial(sum) -> Replicate()',
      '0: Replicate() -> Partial(max)',
    ]);
  });

  it('gathers a later mesh dim first when it shards a tensor dim the step moves', () => {
    expect(plan([Shard(0), Shard(1)], [Shard(1), Shard(0)])).toEqual([
      '1: Shard(1) -> Replicate()',
      '0: Shard(0) -> Shard(1)',
      '1: Replicate() -> Shard(0)',
    ]);
    expect(plan([Replicate(), Shard(0)], [Shard(0), Shard(0)])).toEqual([
      '1: Shard(0) -> Replicate()',
      '0: Replicate() -> Shard(0)',
      '1: Replicate() -> Shard(0)',
    ]);
    // Shard(0) on mesh dim 1 is nested inside mesh dim 0's piece: it is gathered before mesh dim 0.
    expect(plan([Shard(0), Shard(0)], [Replicate(), Replicate()])).toEqual([
      '1: Shard(0) -> Replicate()',
      '0: Shard(0) -> Replicate()',
    ]);
  });

  it('refuses Shard -> Partial, naming the mesh dim', () => {
    expect(() => plan([Replicate(), Shard(1)], [Replicate(), Partial('max')])).toThrow(
      'test: mesh dim 1 cannot go from Shard(1) to Partial(max) (a shard is not a partial term); redistribute to Replicate() first if that is meant',
    );
  });
});
