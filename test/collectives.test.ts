import { describe, expect, it } from 'vitest';
import { type DType, spawnThreads } from '../src/index.ts';
import type { ConformanceArgs } from './fixtures/collectives-rank.ts';
import { opsFor, referenceReduce, tolerance, values } from './fixtures/conformance.ts';

const entry = new URL('./fixtures/collectives-rank.ts', import.meta.url);
const DTYPES: DType[] = ['float32', 'bfloat16', 'int64', 'bool'];
// 5 elements take the one-exchange path; 40,000 the reduce-scatter + all-gather path.
const COUNTS = [5, 40_000];

function expectClose(actual: number[], expected: number[], dtype: DType, what: string): void {
  expect(actual.length, what).toBe(expected.length);
  const tol = tolerance(dtype);
  for (let i = 0; i < expected.length; i++) {
    const ok =
      tol === 0
        ? actual[i] === expected[i]
        : Math.abs(actual[i] - expected[i]) <= tol * (1 + Math.abs(expected[i]));
    if (!ok) expect.fail(`${what}[${i}]: got ${actual[i]}, expected ${expected[i]}`);
  }
}

const cast = (dtype: DType, v: number[]) => referenceReduce('max', dtype, [v]);

describe.each([1, 2, 3, 4, 8])('collectives with %i rank(s)', { timeout: 180_000 }, (n) => {
  it('match a single-threaded reference for every dtype', async () => {
    const args: ConformanceArgs = { dtypes: DTYPES, counts: COUNTS };
    const results = (await spawnThreads(entry, { worldSize: n, args, collectiveTimeoutMs: 30_000 })) as Array<
      Record<string, number[] & number[][]>
    >;
    const ranks = Array.from({ length: n }, (_, r) => r);
    let salt = 0;
    for (const dtype of DTYPES) {
      for (const count of COUNTS) {
        const id = `${dtype}/${count}`;
        const inputs = ranks.map((r) => values(r, count, dtype, salt));
        for (const op of opsFor(dtype)) {
          const expected = referenceReduce(op, dtype, inputs);
          for (const r of ranks)
            expectClose(
              results[r][`allReduce/${op}/${id}`],
              expected,
              dtype,
              `allReduce ${op} ${id} rank ${r}`,
            );
          expectClose(results[n - 1][`reduce/${op}/${id}`], expected, dtype, `reduce ${op} ${id}`);
        }
        for (const r of ranks) {
          expect(results[r][`broadcast/${id}`]).toEqual(cast(dtype, inputs[n - 1]));
          expect(results[r][`allGather/${id}`]).toEqual(inputs.map((v) => cast(dtype, v)));
          expect(results[r][`allGatherInto/${id}`]).toEqual(inputs.flatMap((v) => cast(dtype, v)));
          // reduceScatter: rank q's inputs[p] used salt + p.
          const rsInputs = ranks.map((q) => values(q, count, dtype, salt + r));
          expectClose(
            results[r][`reduceScatter/${id}`],
            referenceReduce('sum', dtype, rsInputs),
            dtype,
            `reduceScatter ${id}`,
          );
          const rstInputs = ranks.map((q) =>
            values(q, n * count, dtype, salt).slice(r * count, (r + 1) * count),
          );
          expectClose(
            results[r][`reduceScatterTensor/${id}`],
            referenceReduce('sum', dtype, rstInputs),
            dtype,
            `reduceScatterTensor ${id}`,
          );
          expect(results[r][`allToAll/${id}`]).toEqual(
            ranks.map((q) => cast(dtype, values(q, count, dtype, salt + r))),
          );
          expect(results[r][`scatter/${id}`]).toEqual(cast(dtype, values(r, count, dtype, salt)));
        }
        expect(results[0][`gather/${id}`]).toEqual(inputs.map((v) => cast(dtype, v)));
        salt++;
      }
      for (const r of ranks) {
        // What rank q sent to r: rows [offset, offset + (r + q) % 3) of q's input, where q's
        // offset to r is the sum of its splits to lower ranks.
        const expected = ranks.flatMap((q) => {
          const splits = ranks.map((p) => (p + q) % 3);
          const rows = splits.reduce((a, b) => a + b, 0);
          const offset = splits.slice(0, r).reduce((a, b) => a + b, 0);
          return cast(dtype, values(q, rows * 2, dtype, salt)).slice(offset * 2, (offset + splits[r]) * 2);
        });
        expect(results[r][`allToAllSingle/${dtype}`]).toEqual(expected);
      }
    }
  });
});
