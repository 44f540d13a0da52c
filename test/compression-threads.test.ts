/** Compression end to end between thread workers: lossless mixed messages, what was compressed, config reaching every rank. */
import { describe, expect, it } from 'vitest';
import { loadClusterConfig, spawnThreads } from '../src/index.ts';

const entry = new URL('./fixtures/compression-rank.ts', import.meta.url);
// biome-ignore lint/suspicious/noExplicitAny: each scenario returns its own record shape
type Result = any;

describe('compression between workers', () => {
  for (const codec of ['lz4', 'zstd'] as const) {
    it(`${codec}: a mixed message arrives byte-exact; only eligible, compressible tensors were compressed`, async () => {
      const config = loadClusterConfig({
        cluster: {
          collective: { tensor_compression: { codec, excluded_dtypes: ['float32'], min_bytes: 1024 } },
        },
      });
      const [actor, rollout] = await spawnThreads<Result>(entry, {
        worldSize: 2,
        names: ['actor', 'rollout'],
        args: { scenario: 'roundtrip' },
        config,
        timeoutMs: 60_000,
      });
      expect(rollout.equal).toEqual([true, true]);
      expect(actor.echoed).toBe(true);
      // Per message: bfloat16, int32, float16 compressed; float32 (excluded), 100 B (small) and noise raw.
      // zstd's 4 slots are all held by the first message (noise takes one too) when the second is
      // sent right after it, so the second goes raw: the sender never waits for a slot.
      expect(actor.stats).toMatchObject(
        codec === 'lz4' ? { compressed: 6, raw: 6 } : { compressed: 3, raw: 9 },
      );
      expect(actor.stats.wireBytes).toBeLessThan(actor.stats.rawBytes / 4);
      expect(rollout.stats).toMatchObject({ compressed: 3, raw: 3 });
    });
  }

  it('spawnThreads validates a camelCase config and refuses a bad one naming the key', async () => {
    await expect(
      spawnThreads(entry, {
        worldSize: 2,
        // biome-ignore lint/suspicious/noExplicitAny: a config as a user might mistype it
        config: { collective: { tensorCompression: { codec: 'lz4', level: 3 } } } as any,
      }),
    ).rejects.toThrow(
      /config\.collective\.tensorCompression\.level is a parameter of codec zstd, not of lz4/,
    );
  });
});
