/**
 * The koffi bindings (src/cuda/cudart.ts, src/nccl/nccl-library.ts, src/cuda/kernel-loader.ts,
 * library-loader.ts): first against the real libcudart on a machine without
 * a GPU, in a child process of its own so that library and the test double
 * never share a process; then every call against the CUDA/NCCL test double.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { reduceKernelName } from '../src/cuda/api.ts';
import { type CudaRuntimeBinding, cudaRuntime } from '../src/cuda/cudart.ts';
import { cudaKernels } from '../src/cuda/kernel-loader.ts';
import { typeScriptBootstrap } from '../src/launch/module-url.ts';
import { NcclDataType, type NcclLibrary, NcclRedOp, NcclResult } from '../src/nccl/api.ts';
import { NcclError } from '../src/nccl/errors.ts';
import { ncclLibrary } from '../src/nccl/nccl-library.ts';
import { useCudaDouble } from './cuda-double/build.ts';
import { type CudaDoubleControl, cudaDoubleControl } from './cuda-double/control.ts';
import type { RankInput, RunInput, RunOutcome } from './fixtures/nccl-bindings.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const source = (path: string) => new URL(`../src/${path}`, import.meta.url).href;

interface ErrorReport {
  name: string;
  message: string;
  call?: string;
  codeName?: string;
}

/** Runs `body` (an async function's body, with `report(key, value)` and `caught(fn)`) in a fresh Node process. */
function inChildProcess(body: string, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const script = `
    const results = {};
    const report = (key, value) => { results[key] = value; };
    const caught = async (fn) => {
      try { await fn(); return undefined; }
      catch (e) { return { name: e.name, message: e.message, call: e.call, codeName: e.codeName }; }
    };
    ${body}
    console.log(JSON.stringify(results));`;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: REPO,
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (child.status !== 0) {
    throw new Error(
      `child process failed (status ${child.status}, signal ${child.signal}, error ${child.error?.message}): ` +
        `${child.stderr}\nstdout: ${child.stdout}`,
    );
  }
  return JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '{}');
}

/** Whether the dynamic loader would find a system libnccl by soname (then it wins over any wheel). */
function systemHasNccl(): boolean {
  return /libnccl\.so\.2\b/.test(spawnSync('ldconfig', ['-p'], { encoding: 'utf8' }).stdout ?? '');
}

/** This process's env without the library overrides (a double set up by another test must not leak in). */
function envWithoutOverrides(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  for (const name of Object.keys(env)) if (name.startsWith('TENSORCOMM_')) delete env[name];
  return env;
}

describe('without a GPU, against the real libcudart', () => {
  let dir: string;
  let results: Record<string, unknown>;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tensorcomm-bindings-'));
    // A Python environment holding a broken NCCL wheel, and a CUDA_HOME that does not exist.
    const wheelDir = join(dir, 'venv/lib/python3.12/site-packages/nvidia/nccl/lib');
    mkdirSync(wheelDir, { recursive: true });
    writeFileSync(join(wheelDir, 'libnccl.so.2'), 'not a shared library');
    results = inChildProcess(
      `
      const { cudaRuntime } = await import(${JSON.stringify(source('cuda/cudart.ts'))});
      const { ncclLibrary } = await import(${JSON.stringify(source('nccl/nccl-library.ts'))});
      const { cudaKernels } = await import(${JSON.stringify(source('cuda/kernel-loader.ts'))});
      const runtime = cudaRuntime();
      report('path', runtime.path);
      report('reasonBefore', runtime.noDeviceReason() ?? null);
      report('deviceCount', runtime.deviceCount());
      report('reason', runtime.noDeviceReason() ?? null);
      report('malloc', await caught(() => runtime.malloc(1024)));
      report('kernelsPath', cudaKernels().path);
      report('nccl', await caught(() => ncclLibrary()));
      report('ncclAgain', await caught(() => ncclLibrary()));
      process.env.TENSORCOMM_CUDART_LIBRARY = ${JSON.stringify(join(dir, 'missing/libcudart.so.13'))};
      report('override', await caught(() => cudaRuntime()));
      `,
      envWithoutOverrides({ VIRTUAL_ENV: join(dir, 'venv'), CUDA_HOME: join(dir, 'cuda') }),
    );
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('finds libcudart by soname and reports where it was loaded from', () => {
    expect(results.path).toMatch(/^\/.*libcudart\.so/);
    expect(results.kernelsPath).toBe(results.path);
  });

  it('deviceCount is 0, and says why', (context) => {
    if ((results.deviceCount as number) > 0) context.skip('a GPU is visible here');
    expect(results.reasonBefore).toBeNull();
    expect(results.deviceCount).toBe(0);
    expect(results.reason).toMatch(/^cudaGetDeviceCount: cudaError(NoDevice|InsufficientDriver): \S/);
  });

  it('a call that needs a device throws a CudaError naming the call and the CUDA error', (context) => {
    if ((results.deviceCount as number) > 0) context.skip('a GPU is visible here');
    const error = results.malloc as ErrorReport;
    expect(error.name).toBe('CudaError');
    expect(error.call).toBe('cudaMalloc');
    expect(error.codeName).toMatch(/^cudaError(NoDevice|InsufficientDriver)$/);
    expect(error.message).toContain(`cudaMalloc failed: ${error.codeName}`);
  });

  it('no libnccl: GpuUnavailableError naming the env var and every place tried', (context) => {
    if (results.nccl === undefined) context.skip('libnccl is installed here');
    const error = results.nccl as ErrorReport;
    expect(error.name).toBe('GpuUnavailableError');
    expect(error.message).toContain('Set TENSORCOMM_NCCL_LIBRARY to the full path of libnccl.so.2');
    for (const tried of [
      'dynamic loader search for libnccl.so.2',
      'dynamic loader search for libnccl.so:',
      `${join(dir, 'cuda/lib64')}: no such directory`,
      `${join(dir, 'cuda/targets/x86_64-linux/lib')}: no such directory`,
      '/usr/local/cuda/lib64',
      `${join(dir, 'venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2')}: `,
    ]) {
      expect(error.message).toContain(tried);
    }
    expect(results.ncclAgain).toEqual(error);
  });

  it('an override that does not load names the variable, the path and the loader message', () => {
    const error = results.override as ErrorReport;
    expect(error.name).toBe('GpuUnavailableError');
    expect(error.message).toContain(`TENSORCOMM_CUDART_LIBRARY=${join(dir, 'missing/libcudart.so.13')}`);
    expect(error.message).toMatch(/could not be loaded: .*No such file/);
  });
});

describe('importing the bindings', () => {
  it('loads no CUDA library', () => {
    const results = inChildProcess(
      `
      for (const file of ['cuda/cudart.ts', 'nccl/nccl-library.ts', 'cuda/kernel-loader.ts', 'cuda/library-loader.ts', 'cuda/errors.ts', 'nccl/errors.ts']) {
        await import(new URL(file, ${JSON.stringify(source(''))}).href);
      }
      const { readFileSync } = await import('node:fs');
      report('mapped', readFileSync('/proc/self/maps', 'utf8').split('\\n').filter((l) => /libcudart|libnccl/.test(l)));
      `,
      envWithoutOverrides({}),
    );
    expect(results.mapped).toEqual([]);
  });
});

describe('against the CUDA/NCCL test double', () => {
  const saved = Object.fromEntries(
    ['TENSORCOMM_CUDART_LIBRARY', 'TENSORCOMM_NCCL_LIBRARY', 'TENSORCOMM_CUDA_DOUBLE_DEVICES'].map((name) => [
      name,
      process.env[name],
    ]),
  );
  let control: CudaDoubleControl;
  let cuda: CudaRuntimeBinding;
  let nccl: NcclLibrary;

  // The first use after the double's sources change compiles it: as long as cuda-double.test.ts allows.
  beforeAll(async () => {
    await useCudaDouble(4);
    control = cudaDoubleControl();
    cuda = cudaRuntime();
    nccl = ncclLibrary();
  }, 180_000);

  afterEach(() => {
    const live = {
      allocations: control.liveAllocations(),
      streams: control.liveStreams(),
      events: control.liveEvents(),
      comms: control.liveComms(),
      ipcMappings: control.openIpcMappings(),
      libraries: control.liveLibraries(),
    };
    control.reset();
    cuda.setDevice(0);
    // Every test releases what it made.
    expect(live).toEqual({ allocations: 0, streams: 0, events: 0, comms: 0, ipcMappings: 0, libraries: 0 });
  });

  afterAll(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  /** Polls a non-blocking communicator (whose first use of a collective reports ncclInProgress once) until it settles. */
  function settledState(comm: bigint): number {
    const deadline = Date.now() + 10_000;
    let state = nccl.commGetAsyncError(comm);
    while (state === NcclResult.inProgress && Date.now() < deadline) state = nccl.commGetAsyncError(comm);
    return state;
  }

  it('loads the libraries the overrides name', () => {
    expect(cuda.path).toBe(process.env.TENSORCOMM_CUDART_LIBRARY);
    expect(nccl.path).toBe(process.env.TENSORCOMM_NCCL_LIBRARY);
    expect(cudaKernels().path).toBe(cuda.path);
    expect(nccl.version()).toBeGreaterThanOrEqual(21800);
  });

  it.skipIf(systemHasNccl())("finds libnccl in a Python environment's NCCL wheel", () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-wheel-'));
    try {
      const wheelDir = join(dir, 'venv/lib/python3.11/site-packages/nvidia/nccl/lib');
      mkdirSync(wheelDir, { recursive: true });
      symlinkSync(nccl.path, join(wheelDir, 'libnccl.so.2'));
      // The double's libnccl finds its libcudart beside itself ($ORIGIN).
      symlinkSync(cuda.path, join(wheelDir, basename(cuda.path)));
      const found = inChildProcess(
        `
        const { ncclLibrary } = await import(${JSON.stringify(source('nccl/nccl-library.ts'))});
        report('path', ncclLibrary().path);
        report('version', ncclLibrary().version());
        `,
        envWithoutOverrides({ VIRTUAL_ENV: join(dir, 'venv') }),
      );
      expect(found).toEqual({ path: join(wheelDir, 'libnccl.so.2'), version: nccl.version() });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('devices: count, current device, and an index out of range', () => {
    expect(cuda.deviceCount()).toBe(4);
    expect(cuda.noDeviceReason()).toBeUndefined();
    cuda.setDevice(3);
    expect(cuda.getDevice()).toBe(3);
    cuda.deviceSynchronize();
    expect(() => cuda.setDevice(4)).toThrow(
      expect.objectContaining({
        name: 'CudaError',
        call: 'cudaSetDevice',
        codeName: 'cudaErrorInvalidDevice',
      }),
    );
    expect(() => cuda.setDevice(-1)).toThrow(RangeError);
  });

  it('memory: copies round-trip between plain and shared host arrays, at offsets, and device memory', () => {
    const bytes = 64;
    const pattern = Uint8Array.from({ length: bytes }, (_, i) => (i * 7 + 3) & 0xff);
    const sharedSource = new Uint8Array(new SharedArrayBuffer(bytes + 16)).subarray(16);
    sharedSource.set(pattern);
    const a = cuda.malloc(bytes);
    const b = cuda.malloc(bytes);
    expect(control.liveAllocations()).toBe(2);
    const stream = cuda.streamCreate();
    try {
      cuda.copy(a, sharedSource, bytes);
      cuda.copy(b, a, bytes);
      const plain = new Uint8Array(bytes + 8);
      cuda.copy(plain.subarray(8), b, bytes);
      expect(plain.subarray(8)).toEqual(pattern);
      expect(plain.subarray(0, 8)).toEqual(new Uint8Array(8));

      cuda.memsetAsync(a, 0xab, 16, stream);
      const sharedTarget = new Uint8Array(new SharedArrayBuffer(bytes));
      cuda.copyAsync(sharedTarget, a, bytes, stream);
      cuda.streamSynchronize(stream);
      expect(sharedTarget.subarray(0, 16)).toEqual(new Uint8Array(16).fill(0xab));
      expect(sharedTarget.subarray(16)).toEqual(pattern.subarray(16));

      expect(() => cuda.copy(a, new Uint8Array(bytes - 1), bytes)).toThrow(
        /cudaMemcpy: source host array holds 63/,
      );
      expect(() => cuda.copyAsync(new Uint8Array(8), a, bytes, stream)).toThrow(RangeError);
      expect(() => cuda.malloc(-1)).toThrow(/cudaMalloc: byte count must be a non-negative integer/);
    } finally {
      cuda.streamDestroy(stream);
      cuda.free(a);
      cuda.free(b);
    }
    expect(control.liveAllocations()).toBe(0);
  });

  it('events: a record behind a collective a peer has not joined is not ready until it does', () => {
    // Both ranks of a non-blocking communicator on this thread: rank 0 waits on rank 1 without blocking anyone.
    const count = 3;
    const uniqueId = nccl.getUniqueId();
    const ranks = [0, 1].map((rank) => {
      cuda.setDevice(rank);
      const comm = nccl.commInitRank(2, uniqueId, rank, { blocking: false });
      const buffer = cuda.malloc(count * 4);
      cuda.copy(buffer, new Uint8Array(new Float32Array(count).fill(rank + 1).buffer), count * 4);
      return { rank, comm, buffer, stream: cuda.streamCreate() };
    });
    expect(ranks.map(({ comm }) => nccl.commGetAsyncError(comm))).toEqual([
      NcclResult.success,
      NcclResult.success,
    ]);
    const [first, second] = ranks;
    cuda.setDevice(0);
    const done = cuda.eventCreate();
    const follower = cuda.streamCreate();
    const followerDone = cuda.eventCreate();
    try {
      nccl.allReduce(
        first.buffer,
        first.buffer,
        count,
        NcclDataType.float32,
        NcclRedOp.sum,
        first.comm,
        first.stream,
      );
      cuda.eventRecord(done, first.stream);
      cuda.streamWaitEvent(follower, done);
      cuda.eventRecord(followerDone, follower);
      expect(cuda.eventQuery(done)).toBe(false);
      expect(cuda.eventQuery(followerDone)).toBe(false);

      cuda.setDevice(1);
      nccl.allReduce(
        second.buffer,
        second.buffer,
        count,
        NcclDataType.float32,
        NcclRedOp.sum,
        second.comm,
        second.stream,
      );
      cuda.eventSynchronize(done);
      expect(cuda.eventQuery(done)).toBe(true);
      expect(ranks.map(({ comm }) => settledState(comm))).toEqual([NcclResult.success, NcclResult.success]);
      cuda.streamSynchronize(follower);
      expect(cuda.eventQuery(followerDone)).toBe(true);
      for (const { buffer } of ranks) {
        const result = new Float32Array(count);
        cuda.copy(new Uint8Array(result.buffer), buffer, count * 4);
        expect([...result]).toEqual([3, 3, 3]);
      }
    } finally {
      cuda.eventDestroy(done);
      cuda.eventDestroy(followerDone);
      cuda.streamDestroy(follower);
      for (const { comm, buffer, stream } of ranks) {
        cuda.streamDestroy(stream);
        cuda.free(buffer);
        nccl.commDestroy(comm);
      }
    }
  });

  it('IPC: 64-byte handles another process opens, uses and closes', () => {
    const bytes = 32;
    const pointer = cuda.malloc(bytes);
    cuda.copy(
      pointer,
      Uint8Array.from({ length: bytes }, (_, i) => i),
      bytes,
    );
    const event = cuda.eventCreate({ interprocess: true });
    const localEvent = cuda.eventCreate();
    try {
      cuda.eventRecord(event, 0n);
      const memHandle = cuda.ipcGetMemHandle(pointer);
      const eventHandle = cuda.ipcGetEventHandle(event);
      expect(memHandle).toBeInstanceOf(Uint8Array);
      expect(memHandle.byteLength).toBe(64);
      expect(eventHandle.byteLength).toBe(64);
      expect(() => cuda.ipcGetEventHandle(localEvent)).toThrow(
        expect.objectContaining({
          call: 'cudaIpcGetEventHandle',
          codeName: 'cudaErrorInvalidResourceHandle',
        }),
      );
      expect(() => cuda.ipcOpenMemHandle(new Uint8Array(63))).toThrow(
        /cudaIpcOpenMemHandle: an IPC handle is/,
      );
      // CUDA refuses to open a handle in the process that made it; the double does too.
      expect(() => cuda.ipcOpenMemHandle(memHandle)).toThrow(
        expect.objectContaining({ name: 'CudaError', call: 'cudaIpcOpenMemHandle' }),
      );

      const peer = inChildProcess(
        `
        const { cudaRuntime } = await import(${JSON.stringify(source('cuda/cudart.ts'))});
        const { cudaDoubleControl } = await import(${JSON.stringify(new URL('./cuda-double/control.ts', import.meta.url).href)});
        const cuda = cudaRuntime();
        const control = cudaDoubleControl();
        const hex = (text) => Uint8Array.from(Buffer.from(text, 'hex'));
        const mapped = cuda.ipcOpenMemHandle(hex(${JSON.stringify(Buffer.from(memHandle).toString('hex'))}));
        report('mappings', control.openIpcMappings());
        const seen = new Uint8Array(${bytes});
        cuda.copy(seen, mapped, ${bytes});
        report('seen', [...seen]);
        cuda.copy(mapped, seen.map((value) => 255 - value), ${bytes});
        cuda.ipcCloseMemHandle(mapped);
        report('mappingsAfterClose', control.openIpcMappings());
        const opened = cuda.ipcOpenEventHandle(hex(${JSON.stringify(Buffer.from(eventHandle).toString('hex'))}));
        cuda.eventSynchronize(opened);
        report('eventDone', cuda.eventQuery(opened));
        cuda.eventDestroy(opened);
        report('eventsAfterDestroy', control.liveEvents());
        `,
        process.env,
      );
      expect(peer).toEqual({
        mappings: 1,
        seen: Array.from({ length: bytes }, (_, i) => i),
        mappingsAfterClose: 0,
        eventDone: true,
        eventsAfterDestroy: 0,
      });
      const written = new Uint8Array(bytes);
      cuda.copy(written, pointer, bytes);
      expect([...written]).toEqual(Array.from({ length: bytes }, (_, i) => 255 - i));
    } finally {
      cuda.eventDestroy(event);
      cuda.eventDestroy(localEvent);
      cuda.free(pointer);
    }
  });

  /** The four communicators below, one after the other on one set of three worker threads (ranks 0-1, then 0-2). */
  const NCCL_RUNS = [2, 3].flatMap((worldSize) => [true, false].map((blocking) => ({ worldSize, blocking })));
  let ncclRuns: Promise<RunOutcome[][]> | undefined;
  for (const [run, { worldSize, blocking }] of NCCL_RUNS.entries()) {
    it(`NCCL on ${worldSize} worker threads, ${blocking ? 'blocking' : 'non-blocking'}: allReduce, allGather, send/recv in a group`, async () => {
      const valuesOf = (size: number) =>
        Array.from({ length: size }, (_, rank) => [rank + 1, (rank + 1) * 10, -rank, 0.5]);
      // The first of these tests starts the threads for all four; each checks its own run.
      ncclRuns ??= runRanks(
        NCCL_RUNS.map((r) => ({ ...r, uniqueId: nccl.getUniqueId(), values: valuesOf(r.worldSize) })),
      );
      const outputs = (await ncclRuns)[run].map((outcome, rank) => {
        if (!outcome.ok) throw new Error(`rank ${rank}: ${outcome.error}`);
        return outcome.output!;
      });
      const values = valuesOf(worldSize);
      const sum = values[0].map((_, i) => values.reduce((total, own) => total + own[i], 0));
      outputs.forEach((output, rank) => {
        expect(output.reduced).toEqual(sum);
        expect(output.gathered).toEqual(values.flat());
        expect(output.fromPrevious).toEqual(values[(rank + worldSize - 1) % worldSize]);
      });
    });
  }

  it('injected CUDA failures surface as CudaError with the call, code and name', () => {
    control.failNext('cudaMalloc', 2);
    expect(() => cuda.malloc(16)).toThrow(
      expect.objectContaining({
        name: 'CudaError',
        code: 'ERR_TC_CUDA',
        call: 'cudaMalloc',
        errno: 2,
        codeName: 'cudaErrorMemoryAllocation',
        message: 'cudaMalloc failed: cudaErrorMemoryAllocation (2): out of memory',
      }),
    );
    const event = cuda.eventCreate();
    try {
      control.failNext('cudaEventQuery', 700);
      // Only cudaErrorNotReady means "not yet": anything else is an error.
      expect(() => cuda.eventQuery(event)).toThrow(
        expect.objectContaining({ call: 'cudaEventQuery', codeName: 'cudaErrorIllegalAddress' }),
      );
      control.failNext('cudaStreamCreateWithFlags', 1);
      expect(() => cuda.streamCreate()).toThrow(
        expect.objectContaining({ call: 'cudaStreamCreateWithFlags', codeName: 'cudaErrorInvalidValue' }),
      );
    } finally {
      cuda.eventDestroy(event);
    }
  });

  it("injected NCCL failures surface as NcclError with the call, the result name and NCCL's last error", () => {
    control.failNext('ncclCommInitRankConfig', NcclResult.internalError);
    expect(() => nccl.commInitRank(1, nccl.getUniqueId(), 0, { blocking: true })).toThrow(
      expect.objectContaining({
        name: 'NcclError',
        call: 'ncclCommInitRankConfig',
        codeName: 'ncclInternalError',
      }),
    );
    expect(() => nccl.commInitRank(1, new Uint8Array(127), 0, { blocking: true })).toThrow(TypeError);
    expect(() => nccl.commInitRank(2, nccl.getUniqueId(), 2, { blocking: true })).toThrow(RangeError);

    const comm = nccl.commInitRank(1, nccl.getUniqueId(), 0, { blocking: true });
    const buffer = cuda.malloc(16);
    try {
      control.failNext('ncclAllReduce', NcclResult.invalidUsage);
      let error: unknown;
      try {
        nccl.allReduce(buffer, buffer, 4, NcclDataType.float32, NcclRedOp.sum, comm, 0n);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(NcclError);
      expect(error).toMatchObject({
        code: 'ERR_TC_NCCL',
        call: 'ncclAllReduce',
        errno: 5,
        codeName: 'ncclInvalidUsage',
      });
      expect((error as Error).message).toMatch(
        /^ncclAllReduce failed: ncclInvalidUsage \(5\): .+: .*injected/,
      );
      control.failNext('ncclGroupEnd', NcclResult.remoteError);
      nccl.groupStart();
      expect(() => nccl.groupEnd()).toThrow(
        expect.objectContaining({ call: 'ncclGroupEnd', codeName: 'ncclRemoteError' }),
      );
    } finally {
      cuda.free(buffer);
      nccl.commDestroy(comm);
    }
  });

  it('kernels: the reduction PTX loads, and tc_reduce_sum_float32 adds two inputs', () => {
    const kernels = cudaKernels();
    const ptx = readFileSync(new URL('../src/cuda/kernels/reduce.ptx', import.meta.url), 'utf8');
    const n = 5;
    const inputs = [
      [1, 2, 3, 4, 5],
      [0.5, -2, 10, 0, 1e6],
    ];
    const library = kernels.loadLibrary(ptx);
    const buffers = inputs.map((values) => {
      const pointer = cuda.malloc(n * 4);
      cuda.copy(pointer, new Uint8Array(new Float32Array(values).buffer), n * 4);
      return pointer;
    });
    const pointerArray = cuda.malloc(buffers.length * 8);
    const out = cuda.malloc(n * 4);
    try {
      cuda.copy(pointerArray, new Uint8Array(BigUint64Array.from(buffers).buffer), buffers.length * 8);
      const kernel = kernels.getKernel(library, reduceKernelName('sum', 'float32'));
      kernels.launch(kernel, 1, 128, 0n, [out, pointerArray, buffers.length, n]);
      cuda.deviceSynchronize();
      const result = new Float32Array(n);
      cuda.copy(new Uint8Array(result.buffer), out, n * 4);
      expect([...result]).toEqual([1.5, 0, 13, 4, 1000005]);

      expect(() => kernels.getKernel(library, 'tc_no_such_kernel')).toThrow(
        expect.objectContaining({
          call: 'cudaLibraryGetKernel',
          message: expect.stringContaining('cudaLibraryGetKernel (tc_no_such_kernel) failed'),
        }),
      );
      expect(() => kernels.launch(kernel, 0, 128, 0n, [])).toThrow(/grid size must be an integer/);
      expect(() => kernels.launch(kernel, 1, 128, 0n, [out, -1])).toThrow(/argument 1 must be/);
      control.failNext('cudaLaunchKernel', 98);
      expect(() => kernels.launch(kernel, 1, 128, 0n, [out, pointerArray, 2, n])).toThrow(
        expect.objectContaining({ call: 'cudaLaunchKernel', codeName: 'cudaErrorInvalidDeviceFunction' }),
      );
    } finally {
      for (const pointer of [...buffers, pointerArray, out]) cuda.free(pointer);
      kernels.unloadLibrary(library);
    }
  });
});

/**
 * One worker thread per rank of the largest run, each running test/fixtures/nccl-bindings.ts for
 * every run it is a rank of; resolves to each run's outcomes in rank order, or rejects when a
 * thread fails or does not finish.
 */
async function runRanks(runs: RunInput[]): Promise<RunOutcome[][]> {
  const fixture = new URL('./fixtures/nccl-bindings.ts', import.meta.url).href;
  const threads = Math.max(...runs.map((r) => r.worldSize));
  const workers = Array.from(
    { length: threads },
    (_, rank) =>
      new Worker(typeScriptBootstrap(fixture), {
        eval: true,
        workerData: { rank, runs } satisfies RankInput,
      }),
  );
  try {
    const ranks = await Promise.all(
      workers.map(
        (worker, rank) =>
          new Promise<RunOutcome[]>((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`rank ${rank} did not finish within ${30 * runs.length} s`)),
              30_000 * runs.length,
            );
            worker.once('message', (outcomes: RunOutcome[]) => {
              clearTimeout(timer);
              resolve(outcomes);
            });
            worker.once('error', (error) => {
              clearTimeout(timer);
              reject(error);
            });
          }),
      ),
    );
    return runs.map((run, i) => ranks.slice(0, run.worldSize).map((outcomes) => outcomes[i]));
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}
