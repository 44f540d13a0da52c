/** Compression end to end between workers (threads; lz4 as processes too): lossless mixed messages, what was compressed, config reaching every rank. */
import { describe, expect, it } from 'vitest';
import { launchProcesses, loadClusterConfig, spawnThreads } from '../src/index.ts';
import type { scenarios } from './fixtures/compression-threads.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(
  new URL('./fixtures/compression-threads.ts', import.meta.url),
);
// biome-ignore lint/suspicious/noExplicitAny: each scenario returns its own record shape
type Result = any;

describe('compression between workers', () => {
  const runs = [
    ['lz4', 'threads'],
    ['zstd', 'threads'],
    ['lz4', 'processes'],
  ] as const;
  for (const [codec, ranks] of runs) {
    it(`${codec} (${ranks}): a mixed message arrives byte-exact; only eligible, compressible tensors were compressed`, async () => {
      const config = loadClusterConfig({
        cluster: {
          collective: { tensor_compression: { codec, excluded_dtypes: ['float32'], min_bytes: 1024 } },
        },
      });
      const job = { names: ['actor', 'rollout'], config, timeoutMs: 60_000 };
      const [actor, rollout]: Result[] = await fixture.run('roundtrip', (entry, args) =>
        ranks === 'threads'
          ? spawnThreads(entry, { worldSize: 2, args, ...job })
          : launchProcesses(entry, { nproc: 2, args, ...job }),
      );
      expect(rollout.equal).toEqual([true, true]);
      expect(actor.echoed).toBe(true);
      // Per message: bfloat16, int32, float16 and the 4-chunk one compressed; float32 (excluded),
      // 100 B (small) and noise raw. A channel compresses one message at a time, so the second
      // finds zstd's slots free again.
      expect(actor.stats).toMatchObject({ compressed: 8, raw: 6 });
      // The random chunk of the big tensor travels raw (1 MiB of each message's ~3.3 MiB compressed).
      expect(actor.stats.wireBytes).toBeGreaterThan(2 * 2 ** 20);
      expect(actor.stats.wireBytes).toBeLessThan(actor.stats.rawBytes / 2.5);
      expect(rollout.stats).toMatchObject({ compressed: 4, raw: 3 });
    });
  }

  it('messages of more parts than wait in the store at once arrive intact and in order', async () => {
    const config = loadClusterConfig({
      cluster: { collective: { tensor_compression: { codec: 'lz4', min_bytes: 1024 } } },
    });
    const [actor, rollout]: Result[] = await fixture.run('many-parts', (entry, args) =>
      spawnThreads(entry, { worldSize: 2, names: ['actor', 'rollout'], args, config, timeoutMs: 60_000 }),
    );
    expect(rollout.equal).toEqual([true, true, true]);
    expect(actor.stats).toMatchObject({ compressed: 48 * 2 + 1, raw: 0 });
  });

  it('spawnThreads validates a camelCase config and refuses a bad one naming the key', async () => {
    await expect(
      spawnThreads(fixture.entry, {
        worldSize: 2,
        // biome-ignore lint/suspicious/noExplicitAny: a config as a user might mistype it
        config: { collective: { tensorCompression: { codec: 'lz4', level: 3 } } } as any,
      }),
    ).rejects.toThrow(
      /config\.collective\.tensorCompression\.level is a parameter of codec zstd, not of lz4/,
    );
  });
});
