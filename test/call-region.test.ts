/**
 * The shared-region path of small allReduces (src/thread-group/store-backend/call-region.ts),
 * with every rank of a group simulated in this one thread: one StoreBackend per rank over
 * MemoryTensorStores sharing one job's memory, their calls run concurrently as promises (the
 * region's waits are asynchronous, so one thread drives them all). 64 ranks cost milliseconds
 * here, where 64 rank threads cost a minute to start; test/region-threads.test.ts runs the
 * same path between real rank threads.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { CommTimeoutError, MemoryTensorStore, Tensor } from '../src/index.ts';
import { setSpinBudget } from '../src/runtime/wait.ts';
import { DTYPES, type DType, itemSize } from '../src/tensor/dtype.ts';
import { reduceArrays } from '../src/tensor/reduce-kernels.ts';
import { isReduceOpDefined, REDUCE_OPS, type ReduceOp } from '../src/tensor/reduce-ops.ts';
import { type CallInfo, CallMismatchError } from '../src/thread-group/backend.ts';
import { regionMaxBytes, SLOTS } from '../src/thread-group/store-backend/call-region.ts';
import { StoreBackend } from '../src/thread-group/store-backend/store-backend.ts';

function simulatedGroup(size: number) {
  // Every simulated rank waits on this one thread: spinning would only hold up the rank it waits for.
  setSpinBudget(size);
  const shared = MemoryTensorStore.createShared();
  const ranks = Array.from({ length: size }, (_, r) => r);
  const stores = ranks.map((rank) => new MemoryTensorStore(shared, { rank, timeoutMs: 5_000 }));
  const backends = ranks.map(
    (rank) => new StoreBackend(stores[rank], { id: 'sim', name: 'sim', rank, size, ranks }),
  );
  let seq = 0;
  return {
    stores,
    /** One allReduce on every rank (or the ranks `tensors` has an entry for), as call number `seq`. */
    allReduce(tensors: Array<Tensor | undefined>, op: ReduceOp | { factor: number }, timeoutMs = 5_000) {
      const call = seq++;
      return tensors.map((t, r) => {
        if (!t) return undefined;
        const info: CallInfo = {
          seq: call,
          signature: `allReduce(${t.describe()}, ${JSON.stringify(op)})`,
          timeoutMs,
        };
        const reduction = typeof op === 'string' ? op : { op: 'premulSum' as const, factor: op.factor };
        return backends[r].allReduce(info, t, reduction);
      });
    },
  };
}

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

describe('allReduce in the shared region, ranks simulated in one thread', () => {
  for (const size of [2, 3, 64]) {
    it(`matches the rank-order reference bit for bit on ${size} ranks, every dtype and op, sizes around the cutoff`, async () => {
      const group = simulatedGroup(size);
      for (const dtype of DTYPES) {
        const atCutoff = regionMaxBytes(size) / itemSize(dtype);
        // Past the cutoff the keyed store serves the call: region-threads.test.ts crosses it, between threads.
        const sizes = size === 64 ? [1, atCutoff] : [1, atCutoff - 1, atCutoff];
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
    const group = simulatedGroup(4);
    const tensors = Array.from({ length: 4 }, (_, r) => Tensor.full([3], r + 1, 'float32'));
    await Promise.all(group.allReduce(tensors, { factor: 0.5 }));
    for (const t of tensors) expect(t.toArray()).toEqual([5, 5, 5]);
  });

  it('keeps many un-awaited calls in order, more than the region has slots', async () => {
    const group = simulatedGroup(8);
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
    const group = simulatedGroup(3);
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
    const group = simulatedGroup(2);
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
    const group = simulatedGroup(3);
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

  it('leaves no store slot in use and the heap flat over many calls', async () => {
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
    expect(group.stores[0].slotsInUse()).toBe(0);
    // What stays after a collection is what calls leak: 100,000 calls leaking even 10 bytes each would show.
    expect(after - before).toBeLessThan(1 << 20);
  });
});
