/**
 * A rank thread loads the native addons and yaml only when it uses them: a
 * rank that never compresses nor parses a config file starts without them.
 */
import { describe, expect, it } from 'vitest';
import { loadClusterConfig, spawnThreads } from '../src/index.ts';

const entry = new URL('./fixtures/module-loads.ts', import.meta.url);

describe('lazily loaded packages', () => {
  it('a rank that only runs a barrier loads none of lz4, zstd, yaml', async () => {
    const loaded = await spawnThreads<string[]>(entry, { worldSize: 2, args: {} });
    for (const packages of loaded) {
      expect(packages).not.toContain('lz4-napi');
      expect(packages).not.toContain('@mongodb-js/zstd');
      expect(packages).not.toContain('yaml');
    }
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
