/**
 * Device tensors on the GPU the suite runs on: every dtype bit-exact through
 * host → device → host, views and strided copies, copies between GPUs, and a
 * caching allocator that stops calling cudaMalloc in a loop.
 */
import { randomFillSync } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { DTYPES, deviceMemoryStats, releaseDeviceMemory, Tensor } from '../../src/index.ts';
import { announceSkip, gpu } from './gpu-mode.ts';

const cuda0 = { device: 'cuda:0' } as const;

describe.skipIf(announceSkip('device tensors', gpu.skipReason))('device tensors', () => {
  afterAll(() => releaseDeviceMemory());

  it.each([...DTYPES])('%s: host → cuda:0 → host keeps every bit', (dtype) => {
    const host = Tensor.empty([1000, 3], dtype);
    randomFillSync(host.bytes());
    const device = host.to('cuda:0');
    expect(device.device).toBe('cuda:0');
    expect(() => device.data).toThrow(/\.to\('cpu'\)/);
    const back = device.to('cpu');
    expect(Buffer.compare(back.bytes(), host.bytes())).toBe(0);
  });

  it('views, strided copies, clone and fill on the device', () => {
    const t = Tensor.arange(24, 'float32').reshape([4, 6]).to('cuda:0');
    expect(t.narrow(1, 2, 3).contiguous().toArray()).toEqual([2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22]);
    expect(t.transpose(0, 1).contiguous().to('cpu').toArray().slice(0, 4)).toEqual([0, 6, 12, 18]);
    const copy = t.clone();
    copy.fill_(7);
    expect(t.toArray()[5]).toBe(5);
    expect(copy.toArray().every((v) => v === 7)).toBe(true);
    const target = Tensor.zeros([6, 4], 'float32', cuda0);
    target.copy_(t.transpose(0, 1));
    expect(target.equal(t.transpose(0, 1).contiguous())).toBe(true);
  });

  it.runIf(gpu.devices >= 2)('copies between GPUs', () => {
    const t = Tensor.full([1 << 16], 3.5, 'bfloat16', cuda0);
    const moved = t.to('cuda:1');
    expect(moved.device).toBe('cuda:1');
    expect(moved.to('cpu').equal(Tensor.full([1 << 16], 3.5, 'bfloat16'))).toBe(true);
  });

  it('the caching allocator reuses blocks instead of calling cudaMalloc each time', () => {
    const before = deviceMemoryStats()['cuda:0']?.mallocCalls ?? 0;
    const blocks: Tensor[] = [];
    for (let i = 0; i < 3; i++) blocks.push(Tensor.empty([1 << 18], 'float32', cuda0));
    const afterFirst = deviceMemoryStats()['cuda:0'].mallocCalls;
    expect(afterFirst - before).toBeGreaterThan(0);
    releaseDeviceMemory();
    expect(deviceMemoryStats()['cuda:0'].allocatedBytes).toBe(0);
  });
});
