import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JobFailedError, RankFailedError, spawnThreads } from '../src/index.ts';
import { settledThreadCount, threadsBeforeJob } from './fixtures/spawn-threads-thread-count.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);

describe('spawnThreads', () => {
  it('runs a TypeScript entry and resolves to every rank’s value in rank order', async () => {
    const before = await threadsBeforeJob();
    const results = await spawnThreads(fixture('spawn-threads-identity.ts'), {
      worldSize: 4,
      args: { tag: 'x' },
      names: ['a', 'b', 'c', 'd'],
    });
    expect(results).toEqual(
      ['a', 'b', 'c', 'd'].map((name, rank) => ({ rank, worldSize: 4, name, device: 'cpu', tag: 'x' })),
    );
    expect(await settledThreadCount(before)).toBe(before);
  });

  it('rejects naming the rank that threw, while the others were blocked in a barrier', async () => {
    const before = await threadsBeforeJob();
    const error = await spawnThreads(fixture('failing-rank.ts'), {
      worldSize: 3,
      args: { failRank: 1, how: 'throw' },
      collectiveTimeoutMs: 60_000,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const failed = error as JobFailedError;
    expect(failed.failures[0].rank).toBe(1);
    expect(failed.failures[0].error.message).toBe('boom from rank 1');
    expect(failed.failures[0].error.stack).toContain('failing-rank.ts');
    // The blocked ranks were woken by the abort and name the rank that failed.
    const echoes = failed.failures.slice(1);
    expect(echoes.map((f) => f.rank).sort()).toEqual([0, 2]);
    for (const echo of echoes) {
      expect(echo.error.name).toBe(RankFailedError.name);
      expect(echo.error.message).toContain('rank 1 (rank-1) failed: Error: boom from rank 1');
    }
    expect(failed.message).toMatch(/rank 1 \(rank-1\): Error: boom from rank 1/);
    expect(await settledThreadCount(before)).toBe(before);
  });

  it('reports a rank that exits without returning', async () => {
    const error = (await spawnThreads(fixture('failing-rank.ts'), {
      worldSize: 2,
      args: { failRank: 0, how: 'exit' },
    }).catch((e: unknown) => e)) as JobFailedError;
    expect(error).toBeInstanceOf(JobFailedError);
    expect(error.failures[0]).toMatchObject({ rank: 0 });
    expect(error.failures[0].error.message).toMatch(/rank 0 \(rank-0\) exited with code 3/);
  });

  it('times out a job whose rank hangs, terminating every thread', async () => {
    const before = await threadsBeforeJob();
    const started = Date.now();
    const error = (await spawnThreads(fixture('failing-rank.ts'), {
      worldSize: 2,
      args: { failRank: 1, how: 'hang' },
      timeoutMs: 500,
      graceMs: 200,
    }).catch((e: unknown) => e)) as JobFailedError;
    expect(error).toBeInstanceOf(JobFailedError);
    expect(error.message).toMatch(/job timed out after 500 ms; ranks still running: 0, 1/);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await settledThreadCount(before)).toBe(before);
  });

  it('stops a rank that is still loading its modules only once it has loaded (stopping one mid-load can abort the process)', async () => {
    const before = await threadsBeforeJob();
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-loading-'));
    const marker = join(dir, 'loaded');
    writeFileSync(marker, '');
    process.env.TENSORCOMM_TEST_LOADED_FILE = marker;
    try {
      const started = Date.now();
      const error = (await spawnThreads(fixture('spawn-threads-slow-loading.ts'), {
        worldSize: 2,
        graceMs: 50,
      }).catch((e: unknown) => e)) as JobFailedError;
      expect(error).toBeInstanceOf(JobFailedError);
      expect(error.failures[0]).toMatchObject({ rank: 0, error: { message: 'rank 0 fails at once' } });
      // Rank 1 was due to stop 50 ms after rank 0 failed, 1.5 s before it had loaded: it was stopped after.
      expect(readFileSync(marker, 'utf8')).toBe('loaded\n');
      expect(Date.now() - started).toBeLessThan(8000);
      expect(await settledThreadCount(before)).toBe(before);
    } finally {
      delete process.env.TENSORCOMM_TEST_LOADED_FILE;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses bad options with messages naming them', async () => {
    const entry = fixture('spawn-threads-identity.ts');
    await expect(spawnThreads(entry, { worldSize: 0 })).rejects.toThrow(/worldSize must be an integer/);
    await expect(spawnThreads(entry, { worldSize: 2, names: ['a'] })).rejects.toThrow(/names has 1 entries/);
    await expect(spawnThreads(entry, { worldSize: 2, names: ['a', 'a'] })).rejects.toThrow(
      /"a" is used twice/,
    );
    await expect(spawnThreads(entry, { worldSize: 1, devices: ['gpu' as never] })).rejects.toThrow(
      /invalid device/,
    );
    await expect(spawnThreads(fixture('missing.ts'), { worldSize: 1 })).rejects.toThrow(/does not exist/);
  });
});
