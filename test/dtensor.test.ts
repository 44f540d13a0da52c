import { beforeAll, describe, expect, it } from 'vitest';
import { type DType, Partial, type Placement, Replicate, Shard, spawnThreads } from '../src/index.ts';
import type { MeshSpec, scenarios, TransitionReport } from './fixtures/dtensor.ts';
import { type StepResults, scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/dtensor.ts', import.meta.url));

const oneD: Placement[] = [Shard(0), Shard(1), Replicate(), Partial('sum'), Partial('max')];
const twoD: Placement[] = [Shard(0), Shard(1), Replicate(), Partial('sum')];
// [4,6] is even for 1, 2 and 2x2; [5,3] is uneven; [2,7] leaves trailing shards empty.
const shapes = [
  [4, 6],
  [5, 3],
  [2, 7],
];
const floats: DType[] = ['float32', 'bfloat16'];
const line = (n: number): MeshSpec => ({
  ranks: Array.from({ length: n }, (_, r) => r),
  shape: [n],
  placements: oneD,
  dtypes: [...floats, 'int32'],
  shapes,
});
const meshes = [
  line(1),
  line(2),
  line(3),
  line(4),
  { ranks: [0, 1, 2, 3], shape: [2, 2], placements: twoD, dtypes: floats, shapes },
];

const STEPS = [{ scenario: 'transitions', args: { meshes } }, 'api'] as const;
/** Both scenarios in one job of four rank threads, the API's (which ends in a timeout) last. */
let job: StepResults<typeof scenarios, typeof STEPS>;
beforeAll(async () => {
  job = await fixture.runSteps(STEPS, (entry, args) =>
    spawnThreads(entry, { worldSize: 4, args, collectiveTimeoutMs: 20_000 }),
  );
}, 120_000);

describe('DTensor redistribute', () => {
  it('every placement transition matches a reference on 1-d meshes of 1-4 ranks and a 2x2 mesh', () => {
    const reports = job.transitions;
    const byMesh = new Map<string, TransitionReport[]>();
    for (const report of reports.flat())
      byMesh.set(report.mesh, [...(byMesh.get(report.mesh) ?? []), report]);
    expect([...byMesh.keys()].sort()).toEqual([
      'DeviceMesh([1], ranks [0])',
      'DeviceMesh([2, 2], ranks [0, 1, 2, 3])',
      'DeviceMesh([2], ranks [0, 1])',
      'DeviceMesh([3], ranks [0, 1, 2])',
      'DeviceMesh([4], ranks [0, 1, 2, 3])',
    ]);
    for (const [mesh, perRank] of byMesh) {
      expect(
        perRank.flatMap((r) => r.failures),
        mesh,
      ).toEqual([]);
      // 1-d: 5 placements -> 25 pairs, 4 of them Shard -> Partial; 3 dtypes x 3 shapes.
      // 2x2: 16 lists -> 256 pairs, 14 x 14 with no Shard -> Partial dim; 2 dtypes x 3 shapes.
      const [pairs, refused] = mesh.startsWith('DeviceMesh([2, 2]') ? [196 * 6, 60 * 6] : [21 * 9, 4 * 9];
      for (const r of perRank) expect([r.pairs, r.refused], mesh).toEqual([pairs, refused]);
    }
  });
});

describe('DeviceMesh and DTensor API', () => {
  it('mesh layout, argument errors, distribute, scatter/gather through the store, partials', () => {
    const res = job.api;
    res.forEach((r, rank) => {
      expect(r.layout).toEqual({
        coordinate: [rank >> 1, rank & 1],
        dim0: [rank & 1, (rank & 1) + 2],
        dim1: [rank & 2, (rank & 2) + 1],
        whole: [0, 1, 2, 3],
        lineIsWhole: true,
        rankAt: 2,
        coordinateOf3: [1, 1],
        text: 'DeviceMesh([2, 2], ranks [0, 1, 2, 3])',
      });
      const e = r.errors;
      expect(e.meshSize).toBe('DeviceMesh: shape [3] has 3 coordinates but group "world" has 4 ranks');
      expect(e.meshShape).toMatch(/DeviceMesh: shape must be a non-empty array of positive integers/);
      if (rank % 2 === 1)
        expect(e.notMember).toMatch(/DeviceMesh: this rank is not a member of group "group\[0,2\]"/);
      expect(e.meshDim).toBe('DeviceMesh.group: dim 2 is not a dimension of mesh [2,2]');
      expect(e.shardDim).toBe('DTensor.fromLocal: placements[0] Shard(2) is out of range for a 2-d tensor');
      expect(e.count).toBe('DTensor.fromLocal: placements must be an array of 2 (one per mesh dimension)');
      expect(e.block).toBe(
        `DTensor.fromLocal: local float32[2,3] is not the [1,3] block that mesh coordinate [${rank}] holds of global shape [4,3] under [Shard(0)]`,
      );
      expect(e.mixed).toMatch(/placements \[Partial\(sum\), Partial\(max\)\] mix Partial ops/);
      expect(e.bitwise).toMatch(/placements\[0\]: band is defined for integer and bool tensors only/);
      expect(e.local).toBe('DTensor.fromLocal: local must be a Tensor, got string x');
      expect(e.shardArg).toBe('Shard: dim must be an integer, got 1.5');
      expect(e.toPartial).toMatch(
        /TypeError: DTensor.redistribute: mesh dim 0 cannot go from Shard\(1\) to Partial\(sum\)/,
      );

      expect(r.inferred).toEqual({
        sharded: [8, 3],
        nested: [2, 12],
        replicated: [2, 3],
        text: 'DTensor(float32[2,12], DeviceMesh([4], ranks [0, 1, 2, 3]), [Shard(1)])',
      });
      expect(r.distributed).toEqual({
        localShape: [5, rank === 3 ? 0 : 1],
        full: true,
        fromTwo: true,
        fromTwoLocal: [rank & 1 ? 2 : 3, 3],
      });
      expect(r.scattered).toHaveLength(4);
      r.scattered.forEach((s: { gathered: boolean | null; viaRedistribute: boolean }, i: number) => {
        expect(s.viaRedistribute, `case ${i}`).toBe(true);
        expect(s.gathered, `case ${i}`).toBe(rank === (i + 1) % 4 ? true : null);
      });
      expect(r.scattered[0].local).toEqual(
        [
          [4, 3],
          [4, 2],
          [3, 3],
          [3, 2],
        ][rank],
      );
      expect(r.exact).toEqual({ sum: true, prod: true, avg: true, min: true });
    });
    for (const rank of [0, 1]) {
      expect(res[rank].disagree).toMatch(
        /^CollectiveMismatchError: scatterTensor: mesh index 0 scattered float32\[4,4\] \[Shard\(0\), Shard\(1\)\], but mesh index 1 expects placements \[Shard\(1\), Shard\(0\)\]$/,
      );
    }
    expect(res[2].disagree).toBe('no error');
    const noTensor = 'scatterTensor: full must be a Tensor on the source (mesh index 0), got undefined';
    expect(res[0].noSource).toContain(`TypeError: ${noTensor}`);
    for (const rank of [1, 2, 3]) {
      expect(res[rank].noSource).toContain(
        `RankFailedError: scatterTensor: the source (mesh index 0) failed: ${noTensor}`,
      );
    }
    expect(res[1].received).toBe(
      'DTensor(float32[2,6], DeviceMesh([2, 2], ranks [0, 1, 2, 3]), [Shard(1), Partial(max)])',
    );
    expect(res[0].timeout).toMatch(
      /CommTimeoutError: destGet\(".*:g\d+:1"\) timed out after 300 ms on rank 0/,
    );
    for (const rank of [2, 3]) expect(res[rank].timeout).toMatch(/CommTimeoutError: srcWaitUntilGetFinished/);
  });
});
