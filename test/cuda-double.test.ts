/**
 * The CUDA/NCCL test double: its C++ self-test (test/cuda-double/selftest/,
 * one section per test), the reduction kernels against reduceArrays, the
 * control API through koffi, the build's error reporting, and whether the
 * committed PTX is what scripts/build-kernels.sh makes of the sources now.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCudaDoubleProgram, useCudaDouble } from './cuda-double/build.ts';
import { cudaDoubleControl } from './cuda-double/control.ts';
import { kernelVectors } from './cuda-double/kernel-vectors.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELFTEST_DIR = join(ROOT, 'test/cuda-double/selftest');
const PTX = join(ROOT, 'src/cuda/kernels/reduce.ptx');

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runProgram(program: string, args: readonly string[]): Promise<Outcome> {
  const env: NodeJS.ProcessEnv = { ...process.env, TENSORCOMM_CUDA_DOUBLE_DEVICES: '4' };
  delete env.TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS;
  return new Promise((resolve) => {
    execFile(program, args, { env, timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error.code as number | undefined) ?? null) : 0, stdout, stderr });
    });
  });
}

describe('CUDA/NCCL test double', () => {
  let selftest: string;
  let scratch: string;

  beforeAll(async () => {
    await useCudaDouble(4);
    const sources = readdirSync(SELFTEST_DIR)
      .filter((file) => file.endsWith('.cpp'))
      .map((file) => join(SELFTEST_DIR, file));
    selftest = await buildCudaDoubleProgram('selftest', sources);
    scratch = mkdtempSync(join(tmpdir(), 'tensorcomm-cuda-double-'));
  }, 180_000);

  afterAll(() => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  const sections: Record<string, string> = {
    runtime: 'devices per thread, error names, memory, handle checks, injected failures, no devices, reset',
    streams: 'stream order, events and cudaErrorNotReady, legacy default stream ordering, blocking waits',
    collectives: 'collectives over 2-4 rank threads: dtypes and ops, float16 rounding, in and out of place',
    p2p: 'a grouped send/recv exchange completes, an ungrouped one deadlocks until aborted, mismatches',
    comms: 'non-blocking and grouped init, argument checks, duplicate devices, mismatch, abort, finalize',
    ipc: 'memory and event handles across a forked child process',
    'wait-limit': 'a wait that can never end gives up after TENSORCOMM_CUDA_DOUBLE_WAIT_LIMIT_MS',
  };
  for (const [section, what] of Object.entries(sections)) {
    it(`${section}: ${what}`, async () => {
      const outcome = await runProgram(selftest, [section]);
      expect(outcome.code, outcome.stderr).toBe(0);
      expect(outcome.stdout).toContain(`ok ${section}`);
    });
  }

  it('kernels: the committed PTX has every kernel, and hand-worked values come out', async () => {
    const outcome = await runProgram(selftest, ['kernels', PTX]);
    expect(outcome.code, outcome.stderr).toBe(0);
  });

  it('kernels give the bits reduceArrays gives, for every op and dtype', async () => {
    const vectors = join(scratch, 'vectors.bin');
    writeFileSync(vectors, kernelVectors());
    const outcome = await runProgram(selftest, ['kernel-vectors', PTX, vectors]);
    expect(outcome.code, outcome.stderr).toBe(0);
  });

  it('the control API counts what CUDA calls through koffi create, and injects failures', () => {
    const control = cudaDoubleControl();
    const cudart = koffi.load(process.env.TENSORCOMM_CUDART_LIBRARY!);
    const cudaMalloc = cudart.func('int cudaMalloc(_Out_ uint64_t *devPtr, size_t size)');
    const cudaFree = cudart.func('int cudaFree(uint64_t devPtr)');
    const pointer = [0n];
    expect(cudaMalloc(pointer, 64)).toBe(0);
    expect(control.liveAllocations()).toBe(1);
    expect(cudaFree(pointer[0])).toBe(0);
    expect(control.liveAllocations()).toBe(0);
    control.failNext('cudaMalloc', 2);
    expect(cudaMalloc(pointer, 64)).toBe(2);
    expect(control.liveAllocations()).toBe(0);
    expect(() => control.failNext('malloc', 2)).toThrow(/CUDA or NCCL function name/);
    expect(cudaMalloc(pointer, 64)).toBe(0);
    control.reset();
    expect(control.liveAllocations()).toBe(0);
    expect([
      control.liveStreams(),
      control.liveEvents(),
      control.liveComms(),
      control.openIpcMappings(),
    ]).toEqual([0, 0, 0, 0]);
  });

  it("a compile error fails the build with g++'s message", async () => {
    const broken = join(scratch, 'broken.cpp');
    writeFileSync(broken, 'int main() { return undeclared_thing; }\n');
    await expect(buildCudaDoubleProgram('broken', [broken])).rejects.toThrow(
      /compiling .*broken\.cpp[\s\S]*undeclared_thing/,
    );
  });

  it('the committed PTX is what scripts/build-kernels.sh makes of reduce.cu now', (context) => {
    const committed = readFileSync(PTX, 'utf8');
    const toolchain = /^\/\/ (Cuda compilation tools.*)$/m.exec(committed)?.[1];
    let installed: string;
    try {
      installed = execFileSync('nvcc', ['--version'], { encoding: 'utf8' });
    } catch {
      context.skip('nvcc is not installed');
      return;
    }
    // Another nvcc writes other (equally valid) PTX; only the same toolchain can tell a stale file.
    if (toolchain === undefined || !installed.includes(toolchain)) {
      context.skip(`reduce.ptx was made by "${toolchain}", the installed nvcc is another version`);
      return;
    }
    const fresh = join(scratch, 'reduce.ptx');
    execFileSync(join(ROOT, 'scripts/build-kernels.sh'), [fresh]);
    expect(
      readFileSync(fresh, 'utf8') === committed,
      'reduce.ptx is stale: run scripts/build-kernels.sh',
    ).toBe(true);
  });
});
