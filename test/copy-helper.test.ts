import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { CopyHelper, HELPED_MIN_BYTES } from '../src/file-store/copy-helper.ts';
import { crossMemory } from '../src/file-store/cross-memory.ts';
import { launchProcesses } from '../src/index.ts';
import { libc, MAP_ANONYMOUS, MAP_PRIVATE, PROT_READ, PROT_WRITE } from '../src/runtime/libc.ts';
import { settledThreadCount, threadCount, threadsBeforeJob } from './fixtures/spawn-threads-thread-count.ts';

const cross = crossMemory();
const MiB = 2 ** 20;

function patterned(bytes: number): Uint8Array {
  const data = new Uint8Array(new SharedArrayBuffer(bytes));
  for (let i = 0; i < bytes; i++) data[i] = (i * 7 + 3) & 0xff;
  return data;
}

async function until(condition: () => boolean, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.skipIf(!cross)('cross-memory reads with the copy helper', { timeout: 60_000 }, () => {
  const read = (address: number, into: Uint8Array, helper: CopyHelper) =>
    cross?.read(process.pid, address, into, helper);

  it('copy the second half of a large value on a thread of their own, every byte, and the thread stops with its last store', async () => {
    const before = await threadsBeforeJob();
    const helper = CopyHelper.acquire();
    const from = patterned(2 * HELPED_MIN_BYTES + 12_345);
    const into = new Uint8Array(new SharedArrayBuffer(from.length));
    const helped = CopyHelper.helpedReads;
    // The first read copies alone and starts the thread.
    read(cross?.addressOf(from) as number, into, helper);
    expect(CopyHelper.helpedReads).toBe(helped);
    expect(Buffer.compare(into, from)).toBe(0);
    await until(() => helper.ready, 10_000);
    expect(threadCount()).toBe(before + 1);
    into.fill(0);
    read(cross?.addressOf(from) as number, into, helper);
    expect(CopyHelper.helpedReads).toBe(helped + 1);
    expect(Buffer.compare(into, from)).toBe(0);
    // A value under the helper's size stays on this thread.
    read(cross?.addressOf(from) as number, into.subarray(0, HELPED_MIN_BYTES - 1), helper);
    expect(CopyHelper.helpedReads).toBe(helped + 1);
    helper.release();
    expect(await settledThreadCount(before)).toBe(before);
    const next = CopyHelper.acquire();
    expect(next).not.toBe(helper);
    next.release();
  });

  it("fail the read naming the errno where the helper's half fails, and the helper copies again after", async () => {
    const helper = CopyHelper.acquire();
    try {
      const warm = patterned(HELPED_MIN_BYTES);
      const into = new Uint8Array(new SharedArrayBuffer(16 * MiB));
      read(cross?.addressOf(warm) as number, into.subarray(0, warm.length), helper);
      await until(() => helper.ready, 10_000);
      // Memory whose second half is gone: this thread's half copies, the helper's faults.
      const { mmap, munmap } = libc();
      const region = mmap(null, 16 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      expect(munmap(region + BigInt(8 * MiB), 8 * MiB)).toBe(0);
      const helped = CopyHelper.helpedReads;
      try {
        expect(() => read(Number(region), into, helper)).toThrow(/process_vm_readv failed \(EFAULT\)/);
        expect(CopyHelper.helpedReads).toBe(helped + 1);
      } finally {
        munmap(region, 8 * MiB);
      }
      const from = patterned(2 * HELPED_MIN_BYTES);
      read(cross?.addressOf(from) as number, into.subarray(0, from.length), helper);
      expect(CopyHelper.helpedReads).toBe(helped + 2);
      expect(Buffer.compare(into.subarray(0, from.length), from)).toBe(0);
    } finally {
      helper.release();
    }
  });

  it('serve large point-to-point messages between rank processes, exact both ways', async () => {
    const entry = new URL('./fixtures/copy-helper-rank.ts', import.meta.url);
    const results = await launchProcesses<{ exact: boolean; helpedReads: number }>(entry, {
      nproc: 2,
      args: { bytes: 2 * HELPED_MIN_BYTES + 4_100, rounds: 40 },
      output: () => {},
    });
    for (const { exact, helpedReads } of results) {
      expect(exact).toBe(true);
      // Ranks have a core each (the spin policy's condition) only where the machine has two.
      expect(helpedReads > 0).toBe(availableParallelism() >= 2);
    }
  });
});
