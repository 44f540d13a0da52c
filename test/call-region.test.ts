/**
 * The shared-region path of small allReduces (src/thread-group/store-backend/call-region.ts),
 * with every rank of a group simulated in this one thread (test/fixtures/simulated-group.ts). 64
 * ranks cost milliseconds here, where 64 rank threads cost a minute to start;
 * test/region-threads.test.ts runs the same path between real rank threads, and the processes'
 * conformance suite between rank processes. */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { FileTensorStore } from '../src/file-store/index.ts';
import { CommTimeoutError, type MemoryTensorStore, Tensor } from '../src/index.ts';
import { setSpinBudget } from '../src/runtime/wait.ts';
import { DTYPES, type DType, itemSize } from '../src/tensor/dtype.ts';
import { reduceArrays } from '../src/tensor/reduce-kernels.ts';
import { isReduceOpDefined, REDUCE_OPS, type ReduceOp } from '../src/tensor/reduce-ops.ts';
import { type CallInfo, CallMismatchError } from '../src/thread-group/backend.ts';
import { allReduceInRegion, fitsRegion } from '../src/thread-group/store-backend/all-reduce-region.ts';
import {
  CallRegion,
  KIND,
  regionBytes,
  regionChunkBytes,
  regionMaxBytes,
  SLOTS,
} from '../src/thread-group/store-backend/call-region.ts';
import {
  type CallRegionMemory,
  callRegionMemory,
} from '../src/thread-group/store-backend/call-region-memory.ts';
import { simulatedGroups } from './fixtures/simulated-group.ts';

const { kinds: KINDS, simulatedGroup: simulated } = simulatedGroups('call-region');
type Kind = keyof typeof KINDS;
const MEMORY: Kind = 'one region of the job arena (thread ranks)';
const simulatedGroup = (size: number, kind: Kind = MEMORY) => simulated(size, kind);

/** Rank r's input: small values of every dtype (bool alternates), different per rank and element. */
function input(dtype: DType, numel: number, rank: number): Tensor {
  const values = Array.from({ length: numel }, (_, i) =>
    dtype === 'bool' ? (rank + i) % 2 : ((rank * 7 + i * 3) % 5) + 1,
  );
  return Tensor.fromArray(values, [numel], dtype);
}

/** Byte equality without vitest's element-by-element diffing, which takes seconds on 64 tensors of 16 KiB. */
function sameBytes(a: Tensor, b: Tensor): boolean {
  return Buffer.from(a.bytes()).equals(Buffer.from(b.bytes()));
}

function reference(op: ReduceOp, inputs: readonly Tensor[]): Tensor {
  const out = Tensor.empty(inputs[0].shape, inputs[0].dtype);
  reduceArrays(
    op,
    out.dtype,
    out.data,
    inputs.map((t) => t.data),
  );
  return out;
}

describe.each(Object.keys(KINDS) as Kind[])('allReduce in %s, ranks simulated in one thread', (kind) => {
  // A job directory's stores are a doorbell and rings each: 64 of them in one thread cost seconds.
  for (const size of kind === MEMORY ? [2, 3, 9, 64] : [2, 3, 9]) {
    it(`matches the rank-order reference bit for bit on ${size} ranks, every dtype and op, sizes around a chunk and the cutoff`, async () => {
      const group = simulatedGroup(size, kind);
      for (const dtype of DTYPES) {
        const chunk = regionChunkBytes(size) / itemSize(dtype);
        // Past the cutoff the keyed store serves the call: region-threads.test.ts crosses it, between threads.
        // Processes have none below 5 ranks: 5 chunks and a piece stand for any size.
        const atCutoff = Math.min(regionMaxBytes(size, kind !== MEMORY) / itemSize(dtype), 5 * chunk + 7);
        const sizes =
          size === 64 || size === 9
            ? [1, atCutoff]
            : [...new Set([1, chunk - 1, chunk, chunk + 1, 2 * chunk + 1, atCutoff - 1, atCutoff])];
        for (const numel of sizes) {
          const inputs = Array.from({ length: size }, (_, r) => input(dtype, numel, r));
          for (const op of REDUCE_OPS.filter((o) => isReduceOpDefined(o, dtype))) {
            const tensors = inputs.map((t) => t.clone());
            const expected = reference(op, inputs);
            await Promise.all(group.allReduce(tensors, op));
            const wrong = tensors.findIndex((t) => !sameBytes(t, expected));
            expect(wrong, `rank ${wrong}'s ${dtype}[${numel}] ${op}`).toBe(-1);
          }
        }
      }
    });
  }

  it('premulSum multiplies each rank by the factor before the sum', async () => {
    const group = simulatedGroup(4, kind);
    const tensors = Array.from({ length: 4 }, (_, r) => Tensor.full([3], r + 1, 'float32'));
    await Promise.all(group.allReduce(tensors, { factor: 0.5 }));
    for (const t of tensors) expect(t.toArray()).toEqual([5, 5, 5]);
  });

  it('keeps many un-awaited calls in order, more than the region has slots', async () => {
    const group = simulatedGroup(8, kind);
    const calls = 5 * SLOTS + 1;
    const all: Array<Promise<void> | undefined> = [];
    const tensors = Array.from({ length: calls }, (_, c) =>
      Array.from({ length: 8 }, (_, r) => Tensor.full([16], c * 100 + r, 'float64')),
    );
    for (let c = 0; c < calls; c++) all.push(...group.allReduce(tensors[c], 'sum'));
    await Promise.all(all);
    // Sum over r of (c*100 + r) = 800c + 28: each call got its own inputs.
    tensors.forEach((ranks, c) => {
      for (const t of ranks) expect(t.toArray()).toEqual(new Array(16).fill(800 * c + 28));
    });
  });

  it('fails every rank with a mismatch naming both ranks when one calls a different shape, then goes on', async () => {
    const group = simulatedGroup(3, kind);
    const tensors = [Tensor.ones([4]), Tensor.ones([8]), Tensor.ones([4])];
    const results = await Promise.allSettled(group.allReduce(tensors, 'sum'));
    for (const [r, result] of results.entries()) {
      expect(result.status).toBe('rejected');
      const error = (result as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(CallMismatchError);
      const other = r === 1 ? 0 : 1;
      expect(error.message).toContain(`rank ${r} called allReduce(float32[${r === 1 ? 8 : 4}]`);
      expect(error.message).toContain(`but rank ${other} called allReduce(float32[${other === 1 ? 8 : 4}]`);
    }
    const next = [0, 1, 2].map((r) => Tensor.full([2], r));
    await Promise.all(group.allReduce(next, 'sum'));
    for (const t of next) expect(t.toArray()).toEqual([3, 3]);
  });

  it('tells signatures of one length apart (compared by their hashes): float32[4] against float32[5]', async () => {
    const group = simulatedGroup(2, kind);
    const results = await Promise.allSettled(group.allReduce([Tensor.ones([4]), Tensor.ones([5])], 'sum'));
    for (const [r, result] of results.entries()) {
      expect(result.status).toBe('rejected');
      const error = (result as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(CallMismatchError);
      expect(error.message).toContain(`rank ${r} called allReduce(float32[${4 + r}]`);
      expect(error.message).toContain(`but rank ${1 - r} called allReduce(float32[${5 - r}]`);
    }
  });

  it('times out naming the rank that did not come, and that rank fails when it does', async () => {
    const group = simulatedGroup(3, kind);
    const early = group.allReduce([Tensor.ones([4]), undefined, Tensor.ones([4])], 'sum', 200);
    // Both handled at once: the two time out together, and one awaited after the other would be a rejection
    // nobody handled yet.
    const errors = await Promise.all(
      [early[0], early[2]].map((settled) => settled?.catch((e: unknown) => e)),
    );
    for (const [r, error] of errors.entries()) {
      expect(error).toBeInstanceOf(CommTimeoutError);
      expect((error as Error).message).toMatch(
        new RegExp(
          `call #0 on group "sim": rank ${r * 2} timed out after 200 ms waiting for group rank 1 \\(global rank 1\\)`,
        ),
      );
    }
  });

  it(`serves allReduces up to ${kind === MEMORY ? '1 MiB' : 'any size'} between up to 4 ranks, 1 MiB up to 16, 16 KiB beyond`, () => {
    const regionOf = (size: number) => {
      const ranks = Array.from({ length: size }, (_, r) => r);
      const memory = callRegionMemory(KINDS[kind](ranks)[0], `fits${size}`, regionBytes(size), ranks, 0);
      return new CallRegion(memory as CallRegionMemory, { id: 'fits', name: 'fits', rank: 0, size, ranks });
    };
    const fits = (region: CallRegion, bytes: number) =>
      fitsRegion(region, Tensor.empty([bytes], 'uint8')) &&
      !fitsRegion(region, Tensor.empty([bytes + 1], 'uint8'));
    if (kind === MEMORY) expect(fits(regionOf(4), 1 << 20)).toBe(true);
    else expect(fitsRegion(regionOf(4), Tensor.empty([64 << 20], 'uint8'))).toBe(true);
    expect(fits(regionOf(5), 1 << 20)).toBe(true);
    expect(fits(regionOf(16), 1 << 20)).toBe(true);
    expect(fits(regionOf(17), 16 << 10)).toBe(true);
  });

  describe('a rank that stops inside a large call: its peer times out naming it and what it did not do', () => {
    const numel = (2 * regionChunkBytes(2)) / 4 + 1;
    const call: CallInfo = { seq: 0, signature: `allReduce(float32[${numel}], sum)`, timeoutMs: 300 };
    /** Group rank 0 runs the call; group rank 1, driven by hand, brings the first chunk and does `more`. */
    async function stopping(more: (region: CallRegion, slot: number) => Promise<void>) {
      setSpinBudget(2);
      const ranks = [0, 1];
      const stores = KINDS[kind](ranks);
      const regions = ranks.map((rank) => {
        const memory = callRegionMemory(stores[rank], 'chunks', regionBytes(2), ranks, rank);
        return new CallRegion(memory as CallRegionMemory, {
          id: 'chunks',
          name: 'chunks',
          rank,
          size: 2,
          ranks,
        });
      });
      const slot = regions[1].enter(call, KIND.region, call.signature) as number;
      expect(regions[1].arrive(slot)).toBe(false);
      const running = allReduceInRegion(regions[0], call, Tensor.ones([numel]), 'sum', async () => {});
      await more(regions[1], slot);
      const error = await running.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CommTimeoutError);
      return (error as Error).message;
    }
    const timedOut =
      'call #0 on group "chunks": rank 0 timed out after 300 ms waiting for group rank 1 \\(global rank 1\\)';

    it('that does not reduce its share of the first chunk', async () => {
      expect(await stopping(async () => {})).toMatch(
        new RegExp(`${timedOut} to reduce its share of chunk 1 of 3 of the call's data`),
      );
    });

    it('that reduces it but does not bring the second', async () => {
      const message = await stopping(async (region, slot) => {
        await region.outcome(slot, call);
        region.reduceShare(slot, 'sum', 'float32', regionChunkBytes(2) / 4);
        await region.shareReduced(slot, call, 0, 3);
      });
      expect(message).toMatch(new RegExp(`${timedOut} to bring chunk 2 of 3 of the call's data`));
    });
  });

  it.runIf(kind === MEMORY)('leaves no store slot in use and the heap flat over many calls', async () => {
    const group = simulatedGroup(2);
    const tensors = [Tensor.ones([256]), Tensor.ones([256])];
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = async (calls: number) => {
      for (let i = 0; i < calls; i++) await Promise.all(group.allReduce(tensors, 'max'));
      gc();
      return process.memoryUsage().heapUsed;
    };
    await heap(5_000);
    const before = await heap(5_000);
    const after = await heap(100_000);
    expect((group.stores[0] as MemoryTensorStore).slotsInUse()).toBe(0);
    // What stays after a collection is what calls leak: 100,000 calls leaking even 10 bytes each would show.
    expect(after - before).toBeLessThan(1 << 20);
  });
});

describe("the call region of process ranks of one node: a file of group rank 0's", () => {
  /** Each rank's region whose parks last until rung (a wake that went astray would hang the test). */
  function untilRung(size: number) {
    const ranks = Array.from({ length: size }, (_, r) => r);
    const stores = KINDS["a file of group rank 0's (process ranks of one node)"](ranks) as FileTensorStore[];
    return stores.map((store, rank) => {
      const memory = callRegionMemory(store, 'g', regionBytes(size), ranks, rank) as CallRegionMemory;
      const bells = store.nodeDoorbells();
      expect(memory.park && bells).toBeDefined();
      const group = { id: 'g', name: 'g', rank, size, ranks };
      return { store, region: new CallRegion({ ...memory, park: () => bells!.park(60_000) }, group) };
    });
  }
  const call = (seq: number): CallInfo => ({
    seq,
    signature: 'allReduce(float32[2], sum)',
    timeoutMs: 20_000,
  });
  const noKeyed = async () => {};

  it('wakes the ranks parked for the last arrival, and for a slot the call 4 before still holds', async () => {
    setSpinBudget(3);
    const ranks = untilRung(3);
    const tensors = ranks.map((_, r) => Tensor.full([2], r + 1, 'float32'));
    // Ranks 0 and 1 arrive and park; rank 2 comes 20 ms later.
    const early = [0, 1].map((r) => allReduceInRegion(ranks[r].region, call(0), tensors[r], 'sum', noKeyed));
    await new Promise((resolve) => setTimeout(resolve, 20));
    await Promise.all([...early, allReduceInRegion(ranks[2].region, call(0), tensors[2], 'sum', noKeyed)]);
    for (const t of tensors) expect(t.toArray()).toEqual([6, 6]);
    // SLOTS + 1 calls from ranks 0 and 1: the last waits for slot 0, which rank 2 still holds.
    const ahead = Array.from({ length: SLOTS }, (_, i) =>
      [0, 1].map((r) => allReduceInRegion(ranks[r].region, call(i + 1), Tensor.ones([2]), 'sum', noKeyed)),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    for (let i = 0; i < SLOTS; i++)
      await Promise.all([
        ...ahead[i],
        allReduceInRegion(ranks[2].region, call(i + 1), Tensor.ones([2]), 'sum', noKeyed),
      ]);
  });

  it('is made by group rank 0, mapped by the others at their first call, and given up when the group is destroyed', async () => {
    const ranks = untilRung(2);
    const files = () =>
      readdirSync(join(ranks[0].store.dir, 'tmp')).filter((name) => name.startsWith('region.'));
    expect(files()).toEqual(['region.g%3Acalls.0']);
    const tensors = [Tensor.ones([2]), Tensor.ones([2])];
    await Promise.all(
      ranks.map(({ region }, r) => allReduceInRegion(region, call(0), tensors[r], 'sum', noKeyed)),
    );
    expect(tensors[1].toArray()).toEqual([2, 2]);
    for (const { region } of ranks) region.release();
    expect(files()).toEqual([]);
  });
});
