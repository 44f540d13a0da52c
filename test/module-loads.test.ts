/**
 * A rank thread loads the native addons and yaml only when it uses them: a
 * rank that never compresses nor parses a config file starts without them,
 * and one that never calls C (no yielding wait, no GPU) without koffi.
 */
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { loadClusterConfig, spawnThreads } from '../src/index.ts';

const entry = new URL('./fixtures/module-loads.ts', import.meta.url);

describe('lazily loaded packages', () => {
  it('a rank that only runs a barrier loads none of lz4, zstd, yaml, koffi', async () => {
    const loaded = await spawnThreads<string[]>(entry, { worldSize: 2, args: {} });
    expect(loaded).toEqual([[], []]);
  });

  it('with more ranks than cores, the first barrier loads no koffi, a second one’s yielding waits do', async () => {
    const worldSize = availableParallelism() + 1;
    const first = await spawnThreads<string[]>(entry, { worldSize, args: {} });
    expect(first.flat()).toEqual([]);
    // The second barrier's first arrival waits for the others, giving its core away through libc.
    const second = await spawnThreads<string[]>(entry, { worldSize, args: { barriers: 2 } });
    expect(second.some((packages) => packages.includes('koffi'))).toBe(true);
  });

  it('a rank that reduces large tensors loads koffi for libc’s memcpy of shared blocks', async () => {
    const loaded = await spawnThreads<string[]>(entry, { worldSize: 2, args: { reduceLarge: true } });
    expect(loaded).toEqual([['koffi'], ['koffi']]);
  });

  it('a rank with lz4 compression loads lz4 and still not zstd', async () => {
    const loaded = await spawnThreads<string[]>(entry, {
      worldSize: 2,
      args: { send: true },
      config: loadClusterConfig({
        cluster: { collective: { tensor_compression: { enabled: true, codec: 'lz4', min_bytes: 1024 } } },
      }),
    });
    for (const packages of loaded) {
      expect(packages).toContain('lz4-napi');
      expect(packages).not.toContain('@mongodb-js/zstd');
    }
  });
});
