/**
 * torch.distributed parity on NCCL, through the C++ test double of CUDA/NCCL:
 * premulSum as ncclRedOpCreatePreMulSum, uneven reduceScatter as one
 * ncclReduce per rank, barrier after pending GPU calls, and the calls NCCL
 * leaves to the store. The NCCL constants tensorcomm passes are compared with
 * the double's nccl.h, transcribed from NVIDIA/nccl's src/nccl.h.in.
 */

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type Device, spawnThreads } from '../src/index.ts';
import { NCCL_NUM_OPS, NcclDataType, NcclRedOp, NcclScalarResidence } from '../src/nccl/api.ts';
import { ncclReduction } from '../src/nccl/nccl-dtypes.ts';
import { buildCudaDoubleProgram, useCudaDouble } from './cuda-double/build.ts';
import { cudaDoubleControl } from './cuda-double/control.ts';
import {
  checkBarrierImpliesWait,
  checkPremulSum,
  checkUnevenReduceScatter,
} from './fixtures/device-parity-checks.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';
import type { scenarios } from './fixtures/torch-parity-nccl.ts';

const fixture = scenarioFixture<typeof scenarios>(
  new URL('./fixtures/torch-parity-nccl.ts', import.meta.url),
);
const N = 3;
const devices = Array.from({ length: N }, (_, i) => `cuda:${i}` as Device);
const ranks = (entry: URL, args: object) =>
  spawnThreads(entry, { worldSize: N, devices, args, collectiveTimeoutMs: 30_000 });

let results: Awaited<ReturnType<typeof runAll>>;
const runAll = () =>
  fixture.runSteps(
    ['premulSum', 'redOpsLeft', 'unevenReduceScatter', 'barrierImpliesWait', 'storeCalls'],
    ranks,
  );

beforeAll(async () => {
  await useCudaDouble(4);
  results = await runAll();
}, 180_000);

afterEach(() => {
  const control = cudaDoubleControl();
  expect({ comms: control.liveComms(), allocations: control.liveAllocations() }).toEqual({
    comms: 0,
    allocations: 0,
  });
});

const ranksOf = Array.from({ length: N }, (_, r) => r);

describe('premulSum on NCCL', () => {
  it('maps onto a per-call ncclRedOpCreatePreMulSum op with the factor in the dtype', () => {
    const r = ncclReduction({ op: 'premulSum', factor: 0.5 }, 'bfloat16', 'x');
    expect(r.dtype).toBe(NcclDataType.bfloat16);
    // 0.5 as bfloat16: 0x3f00, little-endian.
    expect([...(r.premulScalar ?? [])]).toEqual([0x00, 0x3f]);
    expect([...(ncclReduction({ op: 'premulSum', factor: 3 }, 'float64', 'x').premulScalar ?? [])]).toEqual([
      ...new Uint8Array(new Float64Array([3]).buffer),
    ]);
    expect(ncclReduction('sum', 'float32', 'x')).toEqual({ dtype: NcclDataType.float32, op: NcclRedOp.sum });
  });

  it('multiplies each rank by its own factor, then sums, on every reducing call; no op is left', () => {
    checkPremulSum(results.premulSum);
    for (const res of results.redOpsLeft) {
      expect(res.live).toBe(0);
      expect(res.sum).toEqual(Array(4).fill(2 * N));
    }
  });

  it("passes NCCL's own values for the op and the scalar's residence", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-nccl-premul-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const source = join(dir, 'constants.cpp');
    writeFileSync(
      source,
      `#include <cstdio>
#include "nccl.h"
int main() {
  std::printf("{\\"numOps\\": %d, \\"device\\": %d, \\"hostImmediate\\": %d}\\n", (int)ncclNumOps,
              (int)ncclScalarDevice, (int)ncclScalarHostImmediate);
  return 0;
}
`,
    );
    const program = await buildCudaDoubleProgram('nccl-premul-constants', [source]);
    const { stdout } = await promisify(execFile)(program);
    expect(JSON.parse(stdout)).toEqual({ numOps: NCCL_NUM_OPS, ...NcclScalarResidence });
  });
});

describe('other parity calls on a group on distinct GPUs', () => {
  it('reduceScatter with a different size per rank runs as one ncclReduce per rank', () => {
    checkUnevenReduceScatter(results.unevenReduceScatter);
  });

  it('a barrier implies the GPU calls before it completed', () => {
    checkBarrierImpliesWait(results.barrierImpliesWait);
  });

  it('recvFromAny, monitoredBarrier and object calls run on the store; a GPU recvFromAny is refused', () => {
    const [zero, ...others] = results.storeCalls;
    expect(zero.from).toBe(1);
    expect(zero.gpu).toMatchObject({
      ok: false,
      name: 'TypeError',
      message: expect.stringMatching(/NCCL has no receive from any source/),
    });
    for (const o of others) expect(o.gpu).toEqual({ ok: true });
    expect(results.storeCalls[N - 1].gathered).toEqual(ranksOf.map((r) => ({ rank: r })));
    for (const [r, res] of results.storeCalls.entries()) {
      expect(res.scattered).toBe(`to ${r}`);
      if (r !== N - 1) expect(res.gathered).toBeNull();
    }
  });
});
