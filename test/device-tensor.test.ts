import { execFile } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import '../src/cuda/device-backend.ts';
import { CUDA_CONSTANTS, cudaRuntime } from '../src/cuda/cudart.ts';
import {
  allocateDeviceMemory,
  DeviceOutOfMemoryError,
  deviceMemoryStats,
  releaseDeviceMemory,
  roundAllocation,
} from '../src/cuda/device-memory.ts';
import { GpuUnavailableError } from '../src/cuda/errors.ts';
import { DTYPES, type DType } from '../src/tensor/dtype.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { useCudaDouble } from './cuda-double/build.ts';
import { cudaDoubleControl } from './cuda-double/control.ts';

const DEVICES = 4;
const MiB = 1 << 20;

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const stats = (device = 'cuda:0') => deviceMemoryStats()[device];
const cuda0 = { device: 'cuda:0' } as const;

/** A host tensor of random bytes: every bit pattern, NaN payloads and subnormals included. */
function randomHost(shape: number[], dtype: DType): Tensor {
  const t = Tensor.empty(shape, dtype);
  randomFillSync(t.bytes());
  return t;
}

function sameBytes(a: Tensor, b: Tensor): boolean {
  return Buffer.compare(a.contiguous().bytes(), b.contiguous().bytes()) === 0;
}

/** Runs GC and lets finalizers run until `done` holds (bounded). */
async function collectUntil(done: () => boolean): Promise<void> {
  for (let round = 0; round < 50 && !done(); round++) {
    collectGarbage();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('device tensors (CUDA test double)', () => {
  beforeAll(async () => {
    await useCudaDouble(DEVICES);
  });

  afterAll(() => {
    releaseDeviceMemory();
    expect(cudaDoubleControl().liveAllocations()).toBe(0);
  });

  it('every dtype round-trips cpu → cuda → cpu bit-exact', () => {
    for (const dtype of DTYPES) {
      const host = randomHost([3, 5], dtype);
      const device = host.to('cuda:0');
      expect(device.device).toBe('cuda:0');
      expect(device.dtype).toBe(dtype);
      expect(device.shape).toEqual([3, 5]);
      expect(typeof device.devicePointer).toBe('bigint');
      const back = device.to('cpu');
      expect(back.device).toBe('cpu');
      expect(back.isShared()).toBe(true);
      expect(sameBytes(back, host), dtype).toBe(true);
    }
  });

  it('to() the same device is the tensor itself; cuda:a → cuda:b copies', () => {
    const t = Tensor.arange(12, 'int32', cuda0);
    expect(t.to('cuda:0')).toBe(t);
    const other = t.to('cuda:1');
    expect(other.device).toBe('cuda:1');
    expect(other.devicePointer).not.toBe(t.devicePointer);
    expect(other.toArray()).toEqual(t.toArray());
    t.fill_(7);
    expect(other.toArray()).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('every device operation first makes its tensor’s device current', () => {
    const onOne = Tensor.zeros([4], 'float32', { device: 'cuda:1' });
    const onTwo = Tensor.zeros([4], 'float32', { device: 'cuda:2' });
    const cuda = cudaRuntime();
    onOne.fill_(1);
    expect(cuda.getDevice()).toBe(1);
    onTwo.fill_(2);
    expect(cuda.getDevice()).toBe(2);
    onOne.toArray();
    expect(cuda.getDevice()).toBe(1);
    onTwo.clone();
    expect(cuda.getDevice()).toBe(2);
  });

  it('factories: empty and zeros are zero, ones / full / arange / fill_ hold their values', () => {
    // A reused cache block holds old values, so empty must still clear it.
    const dirty = allocateDeviceMemory(0, 256, 'test');
    cudaRuntime().copy(dirty.pointer, new Uint8Array(256).fill(0xff), 256);
    const dirtyPointer = dirty.pointer;
    dirty.release();
    const empty = Tensor.empty([64], 'int32', cuda0);
    expect(empty.devicePointer).toBe(dirtyPointer);
    expect(empty.toArray()).toEqual(new Array(64).fill(0));
    expect(Tensor.zeros([2, 3], 'float64', cuda0).toArray()).toEqual([0, 0, 0, 0, 0, 0]);
    expect(Tensor.ones([3], 'float16', cuda0).toArray()).toEqual([1, 1, 1]);
    expect(Tensor.full([2], 1.5, 'bfloat16', cuda0).toArray()).toEqual([1.5, 1.5]);
    expect(Tensor.full([2], -1, 'int64', cuda0).toArray()).toEqual([-1, -1]);
    expect(Tensor.full([3], true, undefined, cuda0).toArray()).toEqual([1, 1, 1]);
    const range = Tensor.arange(5, undefined, cuda0);
    expect([range.device, range.dtype]).toEqual(['cuda:0', 'int64']);
    expect(range.toArray()).toEqual([0, 1, 2, 3, 4]);
    expect(Tensor.arange(2.5, 'float32', cuda0).toArray()).toEqual([0, 1, 2]);
    expect(Tensor.zeros([0, 4], 'float32', cuda0).toArray()).toEqual([]);
    expect(Tensor.zeros([3], 'float32', cuda0).fill_(0.25).toArray()).toEqual([0.25, 0.25, 0.25]);
    expect(() => Tensor.zeros([3], 'int8', cuda0).fill_(300)).toThrow(/Tensor\.fill_.*300/);
  });

  it('views share the device storage; fill_ and copy_ through views reach the parent', () => {
    const t = Tensor.zeros([4, 6], 'float32', cuda0);
    const row = t.narrow(0, 1, 1);
    expect(row.devicePointer).toBe(t.devicePointer + 24n);
    row.fill_(1);
    const column = t.narrow(1, 2, 1);
    expect(column.isContiguous()).toBe(false);
    column.fill_(2);
    const transposed = t.transpose(0, 1);
    expect(transposed.devicePointer).toBe(t.devicePointer);
    expect(t.reshape([24]).devicePointer).toBe(t.devicePointer);
    const host = Tensor.zeros([4, 6]);
    host.narrow(0, 1, 1).fill_(1);
    host.narrow(1, 2, 1).fill_(2);
    expect(t.toArray()).toEqual(host.toArray());
    expect(transposed.toArray()).toEqual(host.transpose(0, 1).toArray());
    expect(transposed.contiguous().device).toBe('cuda:0');
    expect(transposed.contiguous().toArray()).toEqual(host.transpose(0, 1).toArray());
  });

  it('strided and converting copies between host and device, and within a device', () => {
    const host = Tensor.arange(24, 'float32').reshape([4, 6]);
    const device = Tensor.zeros([6, 4], 'float32', cuda0);
    device.copy_(host.transpose(0, 1));
    expect(device.toArray()).toEqual(host.transpose(0, 1).toArray());

    // Into a strided device view: the elements between its rows stay as they were.
    const target = Tensor.full([4, 6], -1, 'float32', cuda0);
    target.narrow(1, 1, 3).copy_(host.narrow(1, 0, 3));
    const expected = Tensor.full([4, 6], -1, 'float32');
    expected.narrow(1, 1, 3).copy_(host.narrow(1, 0, 3));
    expect(target.toArray()).toEqual(expected.toArray());

    // A strided device source to the host, and dtype conversion on the device.
    const back = Tensor.zeros([6, 4], 'float32');
    back.copy_(target.transpose(0, 1));
    expect(back.toArray()).toEqual(expected.transpose(0, 1).toArray());
    const ints = Tensor.zeros([4, 6], 'int16', { device: 'cuda:1' });
    ints.copy_(target);
    expect(ints.dtype).toBe('int16');
    expect(ints.toArray()).toEqual(expected.toArray());

    // Overlapping views of one allocation are staged, as on the host.
    const line = Tensor.arange(8, 'int32', cuda0);
    line.narrow(0, 1, 7).copy_(line.narrow(0, 0, 7));
    expect(line.toArray()).toEqual([0, 0, 1, 2, 3, 4, 5, 6]);
  });

  it('clone is an independent contiguous copy on the same device', () => {
    const t = Tensor.arange(6, 'float64', { device: 'cuda:3' }).reshape([2, 3]);
    const copy = t.transpose(0, 1).clone();
    expect(copy.device).toBe('cuda:3');
    expect(copy.isContiguous()).toBe(true);
    t.fill_(9);
    expect(copy.toArray()).toEqual([0, 3, 1, 4, 2, 5]);
  });

  it('cat, split and chunk on a device', () => {
    const a = Tensor.arange(6, 'int32', cuda0).reshape([2, 3]);
    const b = Tensor.full([1, 3], 9, 'int32', cuda0);
    const rows = Tensor.cat([a, b]);
    expect(rows.device).toBe('cuda:0');
    expect(rows.toArray()).toEqual([0, 1, 2, 3, 4, 5, 9, 9, 9]);
    const columns = Tensor.cat([a, a.narrow(1, 0, 1)], 1);
    expect(columns.shape).toEqual([2, 4]);
    expect(columns.toArray()).toEqual([0, 1, 2, 0, 3, 4, 5, 3]);
    const pieces = rows.split([1, 2]);
    expect(pieces.map((p) => [p.device, p.shape])).toEqual([
      ['cuda:0', [1, 3]],
      ['cuda:0', [2, 3]],
    ]);
    expect(pieces[1].toArray()).toEqual([3, 4, 5, 9, 9, 9]);
    expect(pieces[1].devicePointer).toBe(rows.devicePointer + 12n);
    expect(rows.chunk(3, 1).map((p) => p.toArray())).toEqual([
      [0, 3, 9],
      [1, 4, 9],
      [2, 5, 9],
    ]);
    expect(() => Tensor.cat([a, a.to('cpu')])).toThrow(
      /Tensor\.cat: tensors\[1\] is on cpu but tensors\[0\] is on cuda:0/,
    );
    expect(() => Tensor.cat([a, a.to('cuda:1')])).toThrow(TypeError);
  });

  it('equal, allclose and toString read through a host copy', () => {
    const t = Tensor.fromArray([1, 2, 3]).to('cuda:0');
    expect(t.equal(Tensor.fromArray([1, 2, 3]))).toBe(true);
    expect(t.equal(t.to('cuda:1'))).toBe(true);
    expect(t.equal(Tensor.fromArray([1, 2, 4]).to('cuda:0'))).toBe(false);
    expect(t.allclose(Tensor.fromArray([1, 2, 3.000001]))).toBe(true);
    expect(String(t)).toBe("Tensor(float32[3], [1, 2, 3], device='cuda:0')");
  });

  it('host-only accessors name the call and the device and point at .to(cpu)', () => {
    const t = Tensor.zeros([2], 'float32', cuda0);
    expect(() => t.data).toThrow(/Tensor\.data: float32\[2\] is on cuda:0.*\.to\('cpu'\)/);
    expect(() => t.bytes()).toThrow(/Tensor\.bytes: .*cuda:0.*\.to\('cpu'\)/);
    expect(() => t.buffer).toThrow(TypeError);
    expect(t.isShared()).toBe(false);
    expect(() => Tensor.zeros([2]).devicePointer).toThrow(/Tensor\.devicePointer: .*'cpu'/);
  });

  it('fromDevicePointer is a non-owning view on someone else’s device memory', () => {
    const owner = Tensor.arange(8, 'float32', { device: 'cuda:1' });
    const view = Tensor.fromDevicePointer(owner.devicePointer + 8n, 'cuda:1', [2, 3], 'float32');
    expect(view.device).toBe('cuda:1');
    expect(view.toArray()).toEqual([2, 3, 4, 5, 6, 7]);
    view.fill_(0);
    expect(owner.toArray()).toEqual([0, 1, 0, 0, 0, 0, 0, 0]);
    const strided = Tensor.fromDevicePointer(owner.devicePointer, 'cuda:1', [4], 'float32', [2]);
    expect(strided.toArray()).toEqual([0, 0, 0, 0]);
    const where = /Tensor\.fromDevicePointer/;
    expect(() => Tensor.fromDevicePointer(5 as unknown as bigint, 'cuda:1', [1], 'float32')).toThrow(where);
    expect(() => Tensor.fromDevicePointer(owner.devicePointer, 'cpu', [1], 'float32')).toThrow(where);
    expect(() => Tensor.fromDevicePointer(owner.devicePointer + 2n, 'cuda:1', [1], 'float32')).toThrow(where);
    expect(() => Tensor.fromDevicePointer(0n, 'cuda:1', [1], 'float32')).toThrow(where);
    expect(() => Tensor.fromDevicePointer(owner.devicePointer, 'cuda:9', [1], 'float32')).toThrow(
      GpuUnavailableError,
    );
  });

  it('a device index past the last device names the device count', () => {
    expect(() => Tensor.empty([2], 'float32', { device: `cuda:${DEVICES}` })).toThrow(
      new RegExp(
        `Tensor\\.empty: device 'cuda:${DEVICES}' does not exist: ${DEVICES} CUDA devices are visible`,
      ),
    );
    expect(() => Tensor.zeros([2]).to('cuda:99')).toThrow(GpuUnavailableError);
  });

  it('rounds sizes: 512 B granules below 1 MiB, 2 MiB above', () => {
    expect([0, 1, 512, 513, MiB - 1].map(roundAllocation)).toEqual([0, 512, 512, 1024, MiB]);
    expect([MiB, 2 * MiB, 2 * MiB + 1, 5 * MiB].map(roundAllocation)).toEqual([
      2 * MiB,
      2 * MiB,
      4 * MiB,
      6 * MiB,
    ]);
  });

  it('a released block is reused for the next request of its size: no new cudaMalloc', () => {
    const first = allocateDeviceMemory(2, 3000, 'test');
    const pointer = first.pointer;
    const before = stats('cuda:2');
    first.release();
    expect(() => first.pointer).toThrow(/released/);
    expect(stats('cuda:2').cachedBytes).toBe(before.cachedBytes + 3072);
    for (let step = 0; step < 10; step++) {
      const again = allocateDeviceMemory(2, 2600, 'test');
      expect(again.pointer).toBe(pointer);
      again.release();
    }
    expect(stats('cuda:2').mallocCalls).toBe(before.mallocCalls);
    const other = allocateDeviceMemory(2, 4000, 'test');
    expect(stats('cuda:2').mallocCalls).toBe(before.mallocCalls + 1);
    other.release();
  });

  it('a garbage-collected device tensor returns its block to the cache', async () => {
    const bytes = 7 * MiB;
    let pointer = 0n;
    (() => {
      pointer = Tensor.empty([bytes / 4], 'float32', cuda0).devicePointer;
    })();
    const { mallocCalls } = stats();
    await collectUntil(() => stats().cachedBytes >= roundAllocation(bytes));
    const again = Tensor.empty([bytes / 4], 'float32', cuda0);
    expect(again.devicePointer).toBe(pointer);
    expect(stats().mallocCalls).toBe(mallocCalls);
  });

  it('out of memory: frees the cache and retries once, then names the device and the bytes', () => {
    const cached = allocateDeviceMemory(0, 100, 'test');
    cached.release();
    const before = stats();
    expect(before.cachedBytes).toBeGreaterThan(0);
    const control = cudaDoubleControl();
    control.failNext('cudaMalloc', CUDA_CONSTANTS.cudaErrorMemoryAllocation);
    const survivor = Tensor.zeros([5 * MiB], 'uint8', cuda0);
    expect(survivor.devicePointer).toBeTypeOf('bigint');
    const after = stats();
    expect(after.cachedBytes).toBe(0);
    expect(after.freeCalls).toBeGreaterThan(before.freeCalls);
    expect(after.mallocCalls).toBe(before.mallocCalls + 2);

    // failNext arms one failure; arming it again when the first one fires makes the retry fail too.
    const cuda = cudaRuntime();
    const malloc = cuda.malloc;
    let rearm = true;
    cuda.malloc = (bytes) => {
      try {
        return malloc(bytes);
      } catch (failure) {
        if (rearm) control.failNext('cudaMalloc', CUDA_CONSTANTS.cudaErrorMemoryAllocation);
        rearm = false;
        throw failure;
      }
    };
    control.failNext('cudaMalloc', CUDA_CONSTANTS.cudaErrorMemoryAllocation);
    let error: unknown;
    try {
      Tensor.empty([1000], 'float32', cuda0);
    } catch (caught) {
      error = caught;
    } finally {
      cuda.malloc = malloc;
    }
    expect(error).toBeInstanceOf(DeviceOutOfMemoryError);
    expect((error as Error).message).toMatch(
      /^Tensor\.empty: out of memory on cuda:0: cudaMalloc of 4096 bytes \(a 4000-byte request, rounded\).*holds \d+ bytes in live device tensors/,
    );
    expect((error as DeviceOutOfMemoryError).codeName).toBe('cudaErrorMemoryAllocation');
  });

  it('releaseDeviceMemory frees every block, cached or held, and held storage then refuses use', () => {
    const held = Tensor.ones([1000], 'float32', cuda0);
    allocateDeviceMemory(1, 10, 'test').release();
    expect(cudaDoubleControl().liveAllocations()).toBeGreaterThan(0);
    releaseDeviceMemory();
    expect(cudaDoubleControl().liveAllocations()).toBe(0);
    for (const device of Object.values(deviceMemoryStats())) {
      expect([device.allocatedBytes, device.cachedBytes]).toEqual([0, 0]);
    }
    expect(() => held.toArray()).toThrow(/released/);
    // The allocator works on after a teardown.
    expect(Tensor.ones([2], 'int8', cuda0).toArray()).toEqual([1, 1]);
  });
});

describe('device tensors without a GPU', () => {
  it('the real libcudart on a machine without a GPU: GpuUnavailableError naming the call, device and reason', async () => {
    const tensorUrl = new URL('../src/tensor/tensor.ts', import.meta.url).href;
    const backendUrl = new URL('../src/cuda/device-backend.ts', import.meta.url).href;
    const script = `
      import { readFileSync } from 'node:fs';
      const { Tensor } = await import(${JSON.stringify(tensorUrl)});
      const attempt = () => {
        try { Tensor.empty([2], 'float32', { device: 'cuda:0' }); return 'no error'; }
        catch (error) { return error.name + ': ' + error.message; }
      };
      const cudartMapped = () => readFileSync('/proc/self/maps', 'utf8').includes('libcudart');
      const before = attempt();
      await import(${JSON.stringify(backendUrl)});
      const loadedOnImport = cudartMapped();
      console.log(JSON.stringify({ before, loadedOnImport, after: attempt() }));`;
    const env = { ...process.env };
    delete env.TENSORCOMM_CUDART_LIBRARY;
    delete env.TENSORCOMM_NCCL_LIBRARY;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { env, timeout: 30_000 },
    );
    const { before, loadedOnImport, after } = JSON.parse(stdout);
    expect(before).toMatch(/Tensor\.empty: device 'cuda:0' needs the GPU backend .*not loaded/);
    expect(loadedOnImport).toBe(false);
    if (after === 'no error') return; // a machine with a GPU: nothing to check here
    expect(after).toMatch(/^GpuUnavailableError: Tensor\.empty: device 'cuda:0' is not available: /);
    // No driver (this CI machine), no device, or no libcudart at all (then the env var to set).
    expect(after).toMatch(/cudaErrorInsufficientDriver|cudaErrorNoDevice|TENSORCOMM_CUDART_LIBRARY/);
  });
});
