/**
 * The job's region arena, where small collectives and point-to-point mailboxes
 * of thread groups live (src/memory-store/region-arena.ts): it holds the
 * groups of every rank a job makes at any size up to where the rings of N²
 * pairs outgrow it, and the start-up barrier's group takes no mailbox.
 */
import { describe, expect, it } from 'vitest';
import { chooseBackend } from '../src/context/backend-choice.ts';
import { createJobShared, jobArenaBytes } from '../src/context/rank-context.ts';
import { MemoryTensorStore } from '../src/memory-store/memory-tensor-store.ts';
import { createArena, DEFAULT_ARENA_BYTES } from '../src/memory-store/region-arena.ts';
import type { TensorStore } from '../src/runtime/tensor-store.ts';
import { regionBytes } from '../src/thread-group/store-backend/call-region.ts';
import { mailboxBytes } from '../src/thread-group/store-backend/mailbox-memory.ts';

const cpus = (n: number) => Array<'cpu'>(n).fill('cpu');

describe('region arena', () => {
  for (const worldSize of [2, 64, 128]) {
    it(`a job of ${worldSize} ranks has room for the world and three more groups of every rank`, () => {
      const shared = createJobShared({ worldSize, collectiveTimeoutMs: 1000 });
      const store = new MemoryTensorStore(shared.store);
      try {
        for (let group = 0; group < 4; group++) {
          expect(store.sharedRegion(`g${group}`, regionBytes(worldSize))).toBeDefined();
          expect(store.sharedRegion(`g${group}:mail`, mailboxBytes(worldSize))).toBeDefined();
        }
      } finally {
        store.close();
      }
    });
  }

  it('falls back to the default size where the system will not reserve more', () => {
    const real = globalThis.SharedArrayBuffer;
    const sizes: number[] = [];
    class Refusing extends real {
      constructor(bytes: number) {
        sizes.push(bytes);
        if (bytes > 512 << 20) throw new RangeError('Array buffer allocation failed');
        super(bytes);
      }
    }
    globalThis.SharedArrayBuffer = Refusing as SharedArrayBufferConstructor;
    try {
      const arena = createArena(1 << 30);
      expect(sizes).toHaveLength(2);
      expect(arena.byteLength).toBe(sizes[1]);
      expect(sizes[1]).toBeLessThan(sizes[0]);
      expect(sizes[0] - sizes[1]).toBe((1 << 30) - DEFAULT_ARENA_BYTES);
    } finally {
      globalThis.SharedArrayBuffer = real;
    }
  });

  it('stays within what int32 offsets address, however many ranks', () => {
    expect(jobArenaBytes(4096)).toBe(2 ** 30);
    expect(jobArenaBytes(2)).toBe(64 << 20);
  });

  it('the start-up barrier’s group (store only) takes a call region and no mailbox', () => {
    const asked: string[] = [];
    const store = {
      sharedRegion(key: string) {
        asked.push(key);
        return undefined;
      },
    } as unknown as TensorStore;
    const view = { id: 's:0', name: 'startup', rank: 0, size: 4, ranks: [0, 1, 2, 3] };
    chooseBackend(view, { store, devices: cpus(4), timeoutMs: 1000, storeOnly: true });
    expect(asked).toEqual(['s:0']);
    asked.length = 0;
    chooseBackend({ ...view, id: 'w:0' }, { store, devices: cpus(4), timeoutMs: 1000 });
    expect(asked).toEqual(['w:0', 'w:0:mail']);
  });
});
