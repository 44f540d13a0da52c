/**
 * NcclBackend through the C test double of CUDA/NCCL: groups whose members
 * are on distinct GPUs run GPU tensors on NCCL and CPU tensors on the store.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Device, type DType, spawnThreads } from '../src/index.ts';
import { NcclDataType, NcclRedOp } from '../src/nccl/api.ts';
import { ncclServes } from '../src/nccl/nccl-backend.ts';
import { ncclReduction } from '../src/nccl/nccl-dtypes.ts';
import { useCudaDouble } from './cuda-double/build.ts';
import { cudaDoubleControl } from './cuda-double/control.ts';
import type { scenarios } from './fixtures/nccl-backend.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/nccl-backend.ts', import.meta.url));
const gpus = (n: number): Device[] => Array.from({ length: n }, (_, i) => `cuda:${i}` as const);
// biome-ignore lint/suspicious/noExplicitAny: each scenario returns its own record shape
type Result = any;
/** A job of `worldSize` ranks, each on a GPU of its own unless `devices` says otherwise. */
const ranks =
  (worldSize: number, devices = gpus(worldSize)) =>
  (entry: URL, args: object) =>
    spawnThreads<Result>(entry, { worldSize, devices, args });
const run = (
  scenario: keyof typeof scenarios,
  worldSize: number,
  args: object = {},
  devices?: Device[],
): Promise<Result[]> => fixture.run(scenario, ranks(worldSize, devices), args);

const DTYPES: DType[] = ['float32', 'bfloat16', 'int32'];
const collectivesOf = (dtype: DType) => ({ scenario: 'collectives', args: { dtype }, key: dtype }) as const;
/**
 * The scenarios that leave the world's communicator working share a job per
 * world size, one after the other on the same ranks: first the one that
 * counts communicators from none (barrier, batch), the manager's before the
 * collectives' point-to-point calls, and last the ring that deadlocks and
 * aborts it. Those that assert call numbers, or abort earlier, have a job each.
 */
let two: Record<'barrier' | 'loop' | 'bool' | 'mixed' | DType, Result[]>;
let three: Record<'batch' | 'manager' | 'ringUnbatched' | DType, Result[]>;

/** A hook that runs one job of several scenarios gets the time of the tests it stands for (60 s each by default). */
const SHARED_JOB_MS = 180_000;

beforeAll(async () => {
  await useCudaDouble(4);
});
beforeAll(async () => {
  two = await fixture.runSteps(['barrier', 'loop', 'bool', 'mixed', ...DTYPES.map(collectivesOf)], ranks(2));
}, SHARED_JOB_MS);
beforeAll(async () => {
  three = await fixture.runSteps(
    [
      'batch',
      'manager',
      ...DTYPES.map(collectivesOf),
      { scenario: 'ringUnbatched', args: { timeoutMs: 300 } },
    ],
    ranks(3),
  );
}, SHARED_JOB_MS);

afterEach(() => {
  // Every rank closed: communicators, streams, events and device memory are all released.
  const control = cudaDoubleControl();
  expect({
    comms: control.liveComms(),
    streams: control.liveStreams(),
    events: control.liveEvents(),
    allocations: control.liveAllocations(),
  }).toEqual({ comms: 0, streams: 0, events: 0, allocations: 0 });
});

describe('choosing the backend', () => {
  it('NCCL serves groups whose members each have a GPU of their own', () => {
    expect(ncclServes(['cuda:0', 'cuda:1', 'cuda:2'])).toBe(true);
    expect(ncclServes(['cuda:3'])).toBe(true);
    expect(ncclServes(['cuda:0', 'cuda:0'])).toBe(false);
    expect(ncclServes(['cuda:0', 'cpu'])).toBe(false);
    expect(ncclServes(['cpu', 'cpu'])).toBe(false);
    // Across nodes, cuda:0 of each machine is a GPU of its own; two ranks on one machine's cuda:0 share it.
    expect(ncclServes(['cuda:0', 'cuda:1', 'cuda:0', 'cuda:1'], ['a', 'a', 'b', 'b'])).toBe(true);
    expect(ncclServes(['cuda:0', 'cuda:0', 'cuda:1'], ['a', 'a', 'b'])).toBe(false);
  });

  it('a barrier creates a communicator per rank on distinct GPUs, none on the store', async () => {
    expect(two.barrier.map((r: Result) => r.comms)).toEqual([2, 2]);
    for (const devices of [
      ['cpu', 'cpu'],
      ['cuda:0', 'cuda:0'],
      ['cuda:1', 'cpu'],
    ] as Device[][]) {
      expect((await run('barrier', 2, {}, devices)).map((r: Result) => r.comms)).toEqual([0, 0]);
    }
  });
});

describe('dtypes and reduce ops on NCCL', () => {
  it('maps reductions onto NCCL types and ops; bool is or/and on uint8', () => {
    expect(ncclReduction('avg', 'int32', 'x')).toEqual({ dtype: NcclDataType.int32, op: NcclRedOp.avg });
    expect(ncclReduction('sum', 'bfloat16', 'x')).toEqual({
      dtype: NcclDataType.bfloat16,
      op: NcclRedOp.sum,
    });
    for (const op of ['sum', 'max', 'avg'] as const) {
      expect(ncclReduction(op, 'bool', 'x')).toEqual({ dtype: NcclDataType.uint8, op: NcclRedOp.max });
    }
    for (const op of ['prod', 'min'] as const) {
      expect(ncclReduction(op, 'bool', 'x')).toEqual({ dtype: NcclDataType.uint8, op: NcclRedOp.min });
    }
    expect(() => ncclReduction('bxor', 'int32', 'allReduce')).toThrow(
      /allReduce: NCCL has no bxor reduction/,
    );
    expect(() => ncclReduction('sum', 'int16', 'reduce')).toThrow(/reduce: NCCL cannot reduce int16 tensors/);
  });

  it('bool reduces logically; band and int16 reductions are clear TypeErrors; int16 still moves', async () => {
    const res = two.bool;
    for (const r of res) {
      // Rank 0 holds [1,1,0,1], rank 1 holds [0,1,0,0].
      for (const op of ['sum', 'max', 'avg']) expect(r.reduced[op]).toEqual([1, 1, 0, 1]);
      for (const op of ['prod', 'min']) expect(r.reduced[op]).toEqual([0, 1, 0, 0]);
      expect(r.band).toMatchObject({ name: 'TypeError', message: expect.stringMatching(/NCCL has no band/) });
      expect(r.int16).toMatchObject({
        name: 'TypeError',
        message: expect.stringMatching(/NCCL cannot reduce int16 tensors/),
      });
      expect(r.moved).toEqual([8, 8, 8]);
      expect(r.after).toEqual([2]);
    }
  });
});

describe('collectives on GPU tensors match the CPU reference', () => {
  const cases: Array<[DType, number]> = [];
  for (const dtype of ['float32', 'bfloat16', 'int32'] as DType[])
    for (const n of [2, 3]) cases.push([dtype, n]);
  it.each(cases)('%s with %i ranks', (dtype, n) => {
    const res = (n === 2 ? two : three)[dtype];
    for (const r of res) {
      expect(r.mismatches).toEqual([]);
      expect(r.sum).toEqual([0, 1, 2].map(() => (n * (n + 1)) / 2));
    }
  });
});

describe('point-to-point and mixed calls', () => {
  it('batchIsendIrecv runs a ring as one NCCL group on the group communicator', () => {
    const n = 3;
    const res = three.batch;
    res.forEach((r: Result, rank: number) => {
      const from = (rank + n - 1) % n;
      expect(r.works).toBe(4);
      expect(r.received).toEqual([from + 1, from + 1]);
      expect(r.cpuReceived).toEqual([10 * (from + 1), 10 * (from + 1)]);
      // One communicator per rank (the world's): no extra pairwise communicators.
      expect(r.comms).toBe(n);
    });
  });

  it('the same ring as lone GPU sends and receives deadlocks, and times out naming the send', () => {
    const res = three.ringUnbatched;
    for (const r of res) {
      expect(r.sent).toMatchObject({
        name: 'CommTimeoutError',
        message: expect.stringMatching(/^send on group "world": rank \d timed out after 300 ms/),
      });
      expect(r.received.message).toMatch(/^recv on group "world": the group's NCCL communicator was aborted/);
    }
  });

  it('CPU tensors and objects use the store in a group on NCCL; mixtures and other GPUs are refused', () => {
    const res = two.mixed;
    for (const r of res) {
      expect(r.cpu).toEqual([3, 3]);
      expect(r.gpu).toEqual([30, 30]);
      expect(r.gathered).toEqual([0, 1]);
      expect(r.broadcast).toBe('from 0');
      expect(r.mixedCall).toMatchObject({
        name: 'TypeError',
        message: expect.stringMatching(/mixes cpu and GPU/),
      });
      expect(r.wrongGpu).toMatchObject({
        name: 'TypeError',
        message: expect.stringMatching(/is on cuda:\d, but this rank's GPU is cuda:\d/),
      });
    }
  });
});

describe('streams and events', () => {
  it('a loop of collectives reuses its events: two per rank, however many calls', () => {
    const res = two.loop;
    for (const r of res) {
      expect(r.value).toBe(2);
      // Each rank: the event it records on the legacy stream, and one completion event in turn.
      expect(r.events).toBeLessThanOrEqual(4);
    }
  });
});

describe('teardown', () => {
  it('the manager destroys its groups in sorted key order on every rank', () => {
    const res = three.manager;
    const sorted = [
      '0@cuda:0,1@cuda:1',
      '0@cuda:0,1@cuda:1,2@cuda:2',
      '0@cuda:0,2@cuda:2',
      '1@cuda:1,2@cuda:2',
    ];
    res.forEach((r: Result, rank: number) => {
      const mine = sorted.filter((k) => k.includes(`${rank}@`));
      expect(r.keys).toEqual(mine);
      expect(r.destroyed).toEqual(mine);
      // The world's communicators are all that is left.
      expect(r.commsAfter).toBe(3);
    });
    expect(res.map((r: Result) => r.sums)).toEqual([
      [3, 6, 4],
      [3, 6, 5],
      [6, 4, 5],
    ]);
  });
});

describe('failures', () => {
  it('a rank that skips a collective: the others time out naming the call, abort, and fail fast after', async () => {
    const timeoutMs = 300;
    const res = await run('skip', 3, { timeoutMs });
    expect(res[2].skipped).toBe(true);
    // Both others aborted their communicators by then; the skipper's own is the last one.
    expect(res[2].commsAtEnd).toBe(1);
    // Both wait 300 ms: one may hear of the other's timeout (RankFailedError naming it) before its own.
    const firsts = res.slice(0, 2).map((r: Result) => r.errors[0]);
    const heard = firsts.filter((first: Error) => first.name !== 'CommTimeoutError');
    expect(heard.length).toBeLessThan(2);
    for (const first of heard) {
      expect(first.name).toBe('RankFailedError');
      expect(first.message).toMatch(/rank \d failed this call: .*rank \d timed out after 300 ms/);
    }
    for (const r of res.slice(0, 2)) {
      const [first, second] = r.errors;
      if (heard.includes(first)) continue;
      expect(first.message).toMatch(
        /^allReduce\(float32\[4\], sum\) call #1 on group "world": rank \d timed out after 300 ms waiting for the NCCL call/,
      );
      expect(first.message).toMatch(/the communicator was aborted/);
      expect(first.message).toMatch(/ranks that have not arrived at call #1 on group "world": 2/);
      expect(second.name).toBe('CommTimeoutError');
      expect(second.message).toMatch(
        /^broadcast\(float32\[4\], src=0\) call #2 on group "world": the group's NCCL communicator was aborted: allReduce/,
      );
      expect(r.later.message).toMatch(
        /call #3 on group "world": the group's NCCL communicator was aborted earlier/,
      );
    }
  });

  it('an error NCCL reports asynchronously (ranks disagree on a size) fails the call on every rank', async () => {
    const res = await run('mismatch', 2);
    for (const r of res) {
      expect(r.error.name).toBe('NcclError');
      expect(r.error.message).toMatch(
        /^allReduce\(float32\[\d\], sum\) call #0 on group "world": ncclCommGetAsyncError failed: ncclInvalidUsage/,
      );
      expect(r.later.message).toMatch(
        /call #1 on group "world": the group's NCCL communicator was aborted earlier/,
      );
    }
  });

  it('a failing NCCL call: NcclError naming it on that rank; the others fail too, then fail fast', async () => {
    const res = await run('failNext', 3, { timeoutMs: 5000 });
    expect(res[1].error.name).toBe('NcclError');
    expect(res[1].error.message).toMatch(
      /^allReduce\(float32\[4\], sum\) call #1 on group "world": ncclAllReduce failed/,
    );
    for (const r of [res[0], res[2]]) {
      expect(['RankFailedError', 'CommTimeoutError']).toContain(r.error.name);
      expect(r.error.message).toMatch(/call #1 on group "world"/);
    }
    for (const r of res) expect(r.later.message).toMatch(/NCCL communicator was aborted earlier/);
  });
});
