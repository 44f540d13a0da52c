/**
 * broadcast, allGather, reduceScatter, gather, scatter and allToAll of small host tensors in the
 * group's shared region (src/thread-group/store-backend/gather-region.ts, all-to-all-region.ts),
 * every rank of a group simulated in this one thread (test/fixtures/simulated-group.ts): results
 * bit for bit against a reference, up to the most a record holds (served without the keyed store)
 * and one element past it (served by the keyed store, as before), and a call the ranks disagree on
 * failing on every rank, however they split between the two paths.
 */
import { describe, expect, it } from 'vitest';
import { CommTimeoutError, Tensor } from '../src/index.ts';
import { DTYPES, type DType, itemSize } from '../src/tensor/dtype.ts';
import { reduceArrays } from '../src/tensor/reduce-kernels.ts';
import { isReduceOpDefined, REDUCE_OPS, type ReduceOp } from '../src/tensor/reduce-ops.ts';
import { CallMismatchError } from '../src/thread-group/backend.ts';
import { regionChunkBytes } from '../src/thread-group/store-backend/call-region.ts';
import { simulatedGroups } from './fixtures/simulated-group.ts';

const { kinds, simulatedGroup } = simulatedGroups('region-gather');
type Kind = keyof typeof kinds;

/** Rank r's values: small, different per rank and element (bool alternates). */
function values(dtype: DType, numel: number, rank: number, salt = 0): Tensor {
  const xs = Array.from({ length: numel }, (_, i) =>
    dtype === 'bool' ? (rank + i + salt) % 2 : ((rank * 7 + i * 3 + salt) % 5) + 1,
  );
  return Tensor.fromArray(xs, [numel], dtype);
}

const bytesOf = (t: Tensor) => Buffer.from(t.bytes());
const same = (a: Tensor, b: Tensor) => bytesOf(a).equals(bytesOf(b));
const ranksOf = (size: number) => Array.from({ length: size }, (_, r) => r);

/** Elements of `dtype` that bring `bytes` to a record when the call brings `per` of them each. */
const elementsFor = (bytes: number, dtype: DType, per = 1) => Math.floor(bytes / itemSize(dtype) / per);

describe.each(Object.keys(kinds) as Kind[])(
  'gathering calls in %s, ranks simulated in one thread',
  (kind) => {
    for (const size of [2, 3, 5]) {
      const cap = regionChunkBytes(size);
      /** Runs `call` at each count, expecting the region (no value in the keyed store) up to the cap and the store past it. */
      async function acrossTheCap(
        group: ReturnType<typeof simulatedGroup>,
        counts: { fits: number[]; past: number },
        call: (numel: number) => Promise<void>,
      ) {
        for (const numel of counts.fits) {
          const before = group.keyedValues();
          await call(numel);
          expect(group.keyedValues(), `${numel} elements: through the keyed store`).toBe(before);
        }
        const before = group.keyedValues();
        await call(counts.past);
        expect(group.keyedValues(), `${counts.past} elements: in the region`).toBeGreaterThan(before);
      }
      const counts = (dtype: DType, per = 1) => {
        const most = elementsFor(cap, dtype, per);
        return { fits: [1, most], past: most + 1 };
      };

      it(`broadcast from every root on ${size} ranks`, async () => {
        const group = simulatedGroup(size, kind);
        for (const dtype of ['float32', 'int8', 'bfloat16'] as DType[]) {
          for (const src of [0, size - 1]) {
            await acrossTheCap(group, counts(dtype), async (numel) => {
              const tensors = ranksOf(size).map((r) => values(dtype, numel, r));
              const expected = tensors[src].clone();
              await Promise.all(
                group.collective(
                  () => `broadcast(${expected.describe()}, src=${src})`,
                  (b, call, r) => b.broadcast(call, tensors[r], src),
                ),
              );
              for (const t of tensors) expect(same(t, expected)).toBe(true);
            });
          }
        }
      });

      it(`allGather and allGatherInto on ${size} ranks`, async () => {
        const group = simulatedGroup(size, kind);
        for (const dtype of ['float64', 'uint8', 'bool'] as DType[]) {
          await acrossTheCap(group, counts(dtype), async (numel) => {
            const inputs = ranksOf(size).map((r) => values(dtype, numel, r));
            const outputs = ranksOf(size).map(() => ranksOf(size).map(() => Tensor.zeros([numel], dtype)));
            const into = ranksOf(size).map(() => Tensor.zeros([size * numel], dtype));
            const signature = `allGather(${inputs[0].describe()})`;
            await Promise.all(
              group.collective(
                () => signature,
                (b, call, r) => b.allGather(call, outputs[r], inputs[r]),
              ),
            );
            await Promise.all(
              group.collective(
                () => `allGatherInto(${inputs[0].describe()})`,
                (b, call, r) => b.allGatherInto(call, into[r], inputs[r]),
              ),
            );
            const whole = Buffer.concat(inputs.map(bytesOf));
            for (const r of ranksOf(size)) {
              for (const [p, t] of outputs[r].entries())
                expect(same(t, inputs[p]), `rank ${r}'s outputs[${p}]`).toBe(true);
              expect(bytesOf(into[r]).equals(whole), `rank ${r}'s gathered tensor`).toBe(true);
            }
          });
        }
      });

      it(`reduceScatterTensor and reduceScatter of uneven shares on ${size} ranks, every dtype and op, in rank order`, async () => {
        const group = simulatedGroup(size, kind);
        const reduceScatter = async (dtype: DType, op: ReduceOp, numel: number) => {
          const inputs = ranksOf(size).map((r) => values(dtype, size * numel, r));
          const outputs = ranksOf(size).map(() => Tensor.zeros([numel], dtype));
          await Promise.all(
            group.collective(
              () => `reduceScatterTensor(${inputs[0].describe()}, ${op})`,
              (b, call, r) => b.reduceScatterTensor(call, outputs[r], inputs[r], op),
            ),
          );
          for (const r of ranksOf(size)) {
            const expected = Tensor.empty([numel], dtype);
            const slices = inputs.map((t) => t.data.subarray(r * numel, (r + 1) * numel));
            reduceArrays(op, dtype, expected.data, slices);
            expect(same(outputs[r], expected), `rank ${r}: ${dtype}[${numel}] ${op}`).toBe(true);
          }
        };
        for (const dtype of DTYPES) {
          for (const op of REDUCE_OPS.filter((o) => isReduceOpDefined(o, dtype))) {
            for (const numel of [1, 7]) await reduceScatter(dtype, op, numel);
          }
        }
        await acrossTheCap(group, counts('float32', size), (numel) => reduceScatter('float32', 'max', numel));
        // Uneven: rank p's output has p + 1 elements, and every rank passes shares of those shapes.
        const shares = ranksOf(size).map((q) => ranksOf(size).map((p) => values('int32', p + 1, q, p)));
        const outputs = ranksOf(size).map((p) => Tensor.zeros([p + 1], 'int32'));
        await Promise.all(
          group.collective(
            () => 'reduceScatter(uneven, sum)',
            (b, call, r) => b.reduceScatter(call, outputs[r], shares[r], 'sum'),
          ),
        );
        for (const p of ranksOf(size)) {
          const expected = ranksOf(p + 1).map((i) =>
            shares.reduce((sum, mine) => sum + mine[p].toArray()[i], 0),
          );
          expect(outputs[p].toArray()).toEqual(expected);
        }
      });

      it(`gather to a root and scatter from one on ${size} ranks`, async () => {
        const group = simulatedGroup(size, kind);
        const root = size - 1;
        await acrossTheCap(group, counts('float32'), async (numel) => {
          const tensors = ranksOf(size).map((r) => values('float32', numel, r));
          const list = ranksOf(size).map(() => Tensor.zeros([numel], 'float32'));
          await Promise.all(
            group.collective(
              () => `gather(float32[${numel}], dst=${root})`,
              (b, call, r) => b.gather(call, tensors[r], root, r === root ? list : undefined),
            ),
          );
          for (const [p, t] of list.entries())
            expect(same(t, tensors[p]), `gathered from rank ${p}`).toBe(true);
        });
        await acrossTheCap(group, counts('float32', size), async (numel) => {
          const pieces = ranksOf(size).map((p) => values('float32', numel, p, 3));
          const received = ranksOf(size).map(() => Tensor.zeros([numel], 'float32'));
          await Promise.all(
            group.collective(
              () => `scatter(float32[${numel}], src=${root})`,
              (b, call, r) => b.scatter(call, received[r], root, r === root ? pieces : undefined),
            ),
          );
          for (const [r, t] of received.entries()) expect(same(t, pieces[r]), `rank ${r}'s piece`).toBe(true);
        });
      });
    }

    it('allToAll of uneven pieces: in the region while every rank fits, in the keyed store on every rank once one does not', async () => {
      const size = 3;
      const group = simulatedGroup(size, kind);
      /** Rank q's piece for rank p: (q + p + extra) elements, values naming both. */
      const piece = (q: number, p: number, extra: number) =>
        Tensor.fromArray(
          Array.from({ length: q + p + extra }, (_, i) => q * 100 + p * 10 + (i % 10)),
          [q + p + extra],
          'int32',
        );
      const run = async (extra: (q: number) => number) => {
        const inputs = ranksOf(size).map((q) => ranksOf(size).map((p) => piece(q, p, extra(q))));
        const outputs = ranksOf(size).map((p) =>
          ranksOf(size).map((q) => Tensor.zeros([q + p + extra(q)], 'int32')),
        );
        const before = group.keyedValues();
        await Promise.all(
          group.collective(
            () => 'allToAll(int32)',
            (b, call, r) => b.allToAll(call, outputs[r], inputs[r]),
          ),
        );
        for (const p of ranksOf(size))
          for (const q of ranksOf(size))
            expect(outputs[p][q].toArray(), `rank ${p} from rank ${q}`).toEqual(inputs[q][p].toArray());
        return group.keyedValues() - before;
      };
      expect(await run(() => 0)).toBe(0);
      // Rank 2's pieces take more than its record: every rank goes to the keyed store, and all get theirs.
      const most = elementsFor(regionChunkBytes(size), 'int32', size);
      expect(await run((q) => (q === 2 ? most : 0))).toBeGreaterThan(0);
      expect(await run(() => 1)).toBe(0);
    });

    it('allToAll: a rank that expects another size than its peer sends fails naming the peer and both sizes', async () => {
      const group = simulatedGroup(2, kind);
      const inputs = [
        [Tensor.ones([2], 'int32'), Tensor.ones([3], 'int32')],
        [Tensor.ones([2], 'int32'), Tensor.ones([2], 'int32')],
      ];
      // Rank 1 expects 2 elements from rank 0, which sends it 3.
      const outputs = [
        [Tensor.zeros([2], 'int32'), Tensor.zeros([2], 'int32')],
        [Tensor.zeros([2], 'int32'), Tensor.zeros([2], 'int32')],
      ];
      const results = await Promise.allSettled(
        group.collective(
          () => 'allToAll(int32)',
          (b, call, r) => b.allToAll(call, outputs[r], inputs[r]),
        ),
      );
      const error = (results[1] as PromiseRejectedResult).reason;
      expect(error).toBeInstanceOf(CallMismatchError);
      expect(error.message).toContain('rank 1 expects int32[2] (8 bytes) from rank 0, which sent 12 bytes');
    });

    it('allToAll: a rank past the cap and a peer that calls another dtype both fail with the mismatch, none waiting out its timeout', async () => {
      const group = simulatedGroup(2, kind);
      const most = elementsFor(regionChunkBytes(2), 'int32');
      const dtypes = ['int32', 'float32'] as const;
      const inputs = [
        [Tensor.ones([1], 'int32'), Tensor.ones([most], 'int32')],
        [Tensor.ones([1], 'float32'), Tensor.ones([1], 'float32')],
      ];
      const outputs = [
        [Tensor.zeros([1], 'int32'), Tensor.zeros([1], 'int32')],
        [Tensor.zeros([most], 'float32'), Tensor.zeros([1], 'float32')],
      ];
      const started = performance.now();
      const results = await Promise.allSettled(
        group.collective(
          (r) => `allToAll(${dtypes[r]})`,
          (b, call, r) => b.allToAll(call, outputs[r], inputs[r]),
          20_000,
        ),
      );
      expect(performance.now() - started).toBeLessThan(10_000);
      for (const [r, result] of results.entries()) {
        expect(result.status, `rank ${r}`).toBe('rejected');
        const error = (result as PromiseRejectedResult).reason;
        expect(error, `rank ${r}`).toBeInstanceOf(CallMismatchError);
        expect(error.message).toContain(`rank ${r} called allToAll(${dtypes[r]})`);
      }
    });

    it('premulSum multiplies each rank by the factor before the reduceScatter', async () => {
      const group = simulatedGroup(2, kind);
      const inputs = [Tensor.full([4], 1, 'float32'), Tensor.full([4], 3, 'float32')];
      const outputs = [Tensor.zeros([2]), Tensor.zeros([2])];
      await Promise.all(
        group.collective(
          () => 'reduceScatterTensor(float32[4], premulSum)',
          (b, call, r) =>
            b.reduceScatterTensor(call, outputs[r], inputs[r], { op: 'premulSum', factor: 0.5 }),
        ),
      );
      for (const t of outputs) expect(t.toArray()).toEqual([2, 2]);
      // The inputs are left as they were.
      expect(inputs[1].toArray()).toEqual([3, 3, 3, 3]);
    });

    it('fails every rank with a mismatch naming both when one names another root, then goes on', async () => {
      const group = simulatedGroup(3, kind);
      const tensors = [0, 1, 2].map((r) => Tensor.full([2], r, 'float32'));
      const src = (r: number) => (r === 2 ? 1 : 0);
      const results = await Promise.allSettled(
        group.collective(
          (r) => `broadcast(float32[2], src=${src(r)})`,
          (b, call, r) => b.broadcast(call, tensors[r], src(r)),
        ),
      );
      for (const [r, result] of results.entries()) {
        expect(result.status).toBe('rejected');
        const error = (result as PromiseRejectedResult).reason;
        expect(error).toBeInstanceOf(CallMismatchError);
        expect(error.message).toContain(`rank ${r} called broadcast(float32[2], src=${src(r)})`);
      }
      await Promise.all(
        group.collective(
          () => 'broadcast(float32[2], src=2)',
          (b, call, r) => b.broadcast(call, tensors[r], 2),
        ),
      );
      for (const t of tensors) expect(t.toArray()).toEqual([2, 2]);
    });

    it('fails every rank, none waiting out its timeout, when one rank brings one element past the cap', async () => {
      const group = simulatedGroup(2, kind);
      const most = elementsFor(regionChunkBytes(2), 'uint8');
      const inputs = [Tensor.ones([most], 'uint8'), Tensor.ones([most + 1], 'uint8')];
      const outputs = inputs.map((t) => [Tensor.zeros(t.shape, 'uint8'), Tensor.zeros(t.shape, 'uint8')]);
      const started = performance.now();
      const results = await Promise.allSettled(
        group.collective(
          (r) => `allGather(${inputs[r].describe()})`,
          (b, call, r) => b.allGather(call, outputs[r], inputs[r]),
          20_000,
        ),
      );
      expect(performance.now() - started).toBeLessThan(10_000);
      for (const [r, result] of results.entries()) {
        expect(result.status, `rank ${r}`).toBe('rejected');
        expect((result as PromiseRejectedResult).reason).toBeInstanceOf(CallMismatchError);
      }
    });

    it('times out naming the rank that did not come', async () => {
      const group = simulatedGroup(3, kind);
      const results = await Promise.allSettled(
        group.collective(
          () => 'allGather(float32[1])',
          (b, call, r) =>
            r === 1
              ? undefined
              : b.allGather(
                  call,
                  [0, 1, 2].map(() => Tensor.zeros([1])),
                  Tensor.ones([1]),
                ),
          200,
        ),
      );
      for (const r of [0, 2]) {
        const error = (results[r] as PromiseRejectedResult).reason;
        expect(error).toBeInstanceOf(CommTimeoutError);
        expect((error as Error).message).toMatch(
          new RegExp(`rank ${r} timed out after 200 ms waiting for group rank 1 \\(global rank 1\\)`),
        );
      }
    });
  },
);
