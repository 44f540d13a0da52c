import { fork, spawnSync } from 'node:child_process';
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  abortJob,
  cleanupStaleJobDirectories,
  createJobDirectory,
  FileStoreCorruptError,
  FileTensorStore,
  jobDirectoryInfo,
  removeJobDirectory,
} from '../src/file-store/index.ts';
import { RegionAllocator } from '../src/file-store/region-allocator.ts';
import { CommTimeoutError, RankFailedError, Tensor } from '../src/index.ts';
import type { PeerStep } from './fixtures/file-store.ts';
import { scriptStart } from './fixtures/node-script.ts';
import { storeJobs } from './fixtures/store-jobs.ts';

const jobs = storeJobs('file-store');
const { newJob, opened } = jobs;

function stores(dir: string, count: number, timeoutMs = 10_000): FileTensorStore[] {
  const made = Array.from({ length: count }, (_, rank) => new FileTensorStore({ dir, rank, timeoutMs }));
  opened.push(...made);
  return made;
}

/** Folders every store keeps in the job directory, empty once it is idle. */
const LAYOUT = /^(tmp|claims|done|done\/\d+)$/;

/** Everything in the job directory except its (empty) layout folders. */
function leftovers(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((path) => !LAYOUT.test(path));
}

function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid as number;
}

describe('FileTensorStore within one process', () => {
  it('leaves nothing in the job directory once values are finished, key after key', async () => {
    const dir = newJob();
    const [p, c, d] = stores(dir, 3);
    for (let i = 0; i < 10; i++) {
      await p.srcSet('again', Tensor.full([2], i, 'int32'), 2);
      for (const consumer of [c, d]) {
        expect((await consumer.destGet('again')).toArray()).toEqual([i, i]);
        await consumer.destFinishGet('again');
      }
      await p.srcWaitUntilGetFinished('again');
    }
    expect(leftovers(dir)).toEqual([]);
  });

  it('lets one rank take every get of a value, then waits for the next value rather than read it again', async () => {
    const [p] = stores(newJob(), 1);
    await p.srcSet('a', Tensor.arange(4, 'float32'), 2);
    await p.destGet('a');
    await p.destGet('a');
    await expect(p.destGet('a', { timeoutMs: 50 })).rejects.toThrow(
      /^destGet\("a"\) timed out after 50 ms on rank 0: the value under this key was already got by all its consumers/,
    );
    await p.destFinishGet('a');
    await p.destFinishGet('a');
    await p.srcWaitUntilGetFinished('a');
  });

  it('refuses a job directory that does not exist and a rank that is no rank', () => {
    expect(() => new FileTensorStore({ dir: join(jobs.root(), 'missing'), rank: 0 })).toThrow(
      /does not exist/,
    );
    expect(() => new FileTensorStore({ dir: jobs.root(), rank: -1 })).toThrow(
      /rank must be a non-negative integer/,
    );
  });

  it('wakes a waiting consumer and a waiting producer by directory event, not by the fallback poll', async () => {
    const dir = newJob();
    const producer = new FileTensorStore({ dir, rank: 0, pollMs: 60_000 });
    const consumer = new FileTensorStore({ dir, rank: 1, pollMs: 60_000 });
    opened.push(producer, consumer);
    for (const bytes of [4, 1 << 20]) {
      const pending = consumer.destGet('later');
      await new Promise((r) => setTimeout(r, 50));
      let started = performance.now();
      await producer.srcSet('later', Tensor.ones([bytes / 4]), 1);
      await pending;
      expect(performance.now() - started).toBeLessThan(10_000);
      const finished = producer.srcWaitUntilGetFinished('later');
      await new Promise((r) => setTimeout(r, 50));
      started = performance.now();
      await consumer.destFinishGet('later');
      await finished;
      expect(performance.now() - started).toBeLessThan(10_000);
    }
  });
});

describe('FileTensorStore arenas for large payloads', () => {
  const KiB = 1 << 10;
  const MiB = 1 << 20;

  /** int32 elements whose values depend on `seed`, so values of different rounds and keys differ everywhere. */
  function pattern(bytes: number, seed: number): Tensor {
    const t = Tensor.empty([bytes / 4], 'int32');
    const words = t.data as Int32Array;
    for (let i = 0; i < words.length; i++) words[i] = (i * 2654435761 + seed * 40503) | 0;
    return t;
  }

  function arenaFiles(dir: string): string[] {
    return readdirSync(join(dir, 'tmp')).filter((f) => f.startsWith('arena.'));
  }

  function arenaStores(dir: string, arenaBytes: number, maxArenaBytes: number): FileTensorStore[] {
    const made = [0, 1].map(
      (rank) => new FileTensorStore({ dir, rank, timeoutMs: 10_000, arenaBytes, maxArenaBytes }),
    );
    opened.push(...made);
    return made;
  }

  it('keeps several values of mixed sizes outstanding in one reused arena, intact over many rounds', async () => {
    const dir = newJob();
    const [p, c] = arenaStores(dir, 4 * MiB, 16 * MiB);
    const sizes = [100 * KiB, 1 * MiB, 2.5 * MiB, 64 * KiB];
    for (let round = 0; round < 12; round++) {
      const sent = sizes.map((bytes, i) => pattern(bytes, round * 10 + i));
      for (const [i, t] of sent.entries()) await p.srcSet(`big:${i}`, t, 1);
      // The header alone is in the value file; the payload is in the arena.
      for (const i of sizes.keys()) expect(statSync(join(dir, `v.big%3A${i}`)).size).toBeLessThan(4 * KiB);
      for (const [i, t] of sent.entries()) {
        const got = await c.destGet(`big:${i}`);
        expect(got.equal(t)).toBe(true);
      }
      for (const i of sizes.keys()) {
        await c.destFinishGet(`big:${i}`);
        await p.srcWaitUntilGetFinished(`big:${i}`);
      }
      // Freed regions are reused: the four values never need a second arena.
      expect(arenaFiles(dir)).toHaveLength(1);
    }
    p.close();
    c.close();
    expect(leftovers(dir)).toEqual([]);
  });

  it('gives a value bigger than the arena an arena of its own, and sends values beyond the budget in files', async () => {
    const dir = newJob();
    const [p, c] = arenaStores(dir, 1 * MiB, 4 * MiB);
    const small = pattern(200 * KiB, 1);
    const bigger = pattern(3 * MiB, 2);
    const beyond = pattern(2 * MiB, 3);
    await p.srcSet('small', small, 1);
    await p.srcSet('bigger', bigger, 1);
    expect(arenaFiles(dir)).toHaveLength(2);
    await p.srcSet('beyond', beyond, 1);
    expect(arenaFiles(dir)).toHaveLength(2);
    expect(statSync(join(dir, 'v.beyond')).size).toBeGreaterThan(2 * MiB);
    expect(statSync(join(dir, 'v.bigger')).size).toBeLessThan(4 * KiB);
    for (const [key, t] of [
      ['small', small],
      ['bigger', bigger],
      ['beyond', beyond],
    ] as const) {
      expect((await c.destGet(key)).equal(t)).toBe(true);
      await c.destFinishGet(key);
      await p.srcWaitUntilGetFinished(key);
    }
    p.close();
    c.close();
    expect(leftovers(dir)).toEqual([]);
  });

  it('never reuses the region of a value whose consumer is still reading when the producer gives up', async () => {
    const dir = newJob();
    const [p, c] = arenaStores(dir, 1 * MiB, 8 * MiB);
    const first = pattern(512 * KiB, 1);
    await p.srcSet('first', first, 1);
    const view = await c.destGet('first');
    await expect(p.srcWaitUntilGetFinished('first', { timeoutMs: 50 })).rejects.toThrow(CommTimeoutError);
    for (let round = 0; round < 3; round++) {
      await p.srcSet('next', pattern(512 * KiB, 2 + round), 1);
      await c.destGet('next');
      await c.destFinishGet('next');
      await p.srcWaitUntilGetFinished('next');
    }
    expect(view.equal(first)).toBe(true);
    await c.destFinishGet('first');
  });

  it('reports an arena reference outside the arena or to a missing arena as corrupt, failing the producer too', async () => {
    const dir = newJob();
    const [p, c] = arenaStores(dir, 2 * MiB, 8 * MiB);
    /** Rewrites fields of a published header and its checksum (offsets as in value-header.ts). */
    const patchHeader = (key: string, patch: (header: Buffer) => void) => {
      const path = join(dir, `v.${key}`);
      const bytes = readFileSync(path);
      patch(bytes);
      bytes.writeUInt32LE(0, 36);
      bytes.writeUInt32LE(crc32(bytes), 36);
      writeFileSync(path, bytes);
    };
    const cases: [string, (header: Buffer) => void, RegExp][] = [
      [
        'outside',
        (h) => h.writeBigUInt64LE(BigInt(2 * MiB), 56),
        /v\.outside of key "outside" is corrupt: its payload at bytes 2097152\.\.3145728 lies outside arena file \S+\/tmp\/arena\.0\.[0-9a-f]+\.0 of 2097152 bytes/,
      ],
      [
        'missing',
        (h) => h.writeUInt32LE(7, 48),
        /v\.missing of key "missing" is corrupt: its arena file \S+\/tmp\/arena\.0\.[0-9a-f]+\.7 does not exist/,
      ],
      [
        'unaligned',
        (h) => h.writeBigUInt64LE(3n, 56),
        /v\.unaligned of key "unaligned" is corrupt: arena offset 3 is not a multiple of 64/,
      ],
    ];
    for (const [key, patch, message] of cases) {
      await p.srcSet(key, pattern(1 * MiB, 0), 1);
      patchHeader(key, patch);
      const error = await c.destGet(key, { timeoutMs: 5_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(FileStoreCorruptError);
      expect((error as Error).message).toMatch(message);
      if (key !== 'unaligned') {
        // The consumer had claimed the get: the producer hears of the corruption instead of waiting.
        await expect(p.srcWaitUntilGetFinished(key, { timeoutMs: 5_000 })).rejects.toThrow(message);
      } else {
        await expect(p.srcWaitUntilGetFinished(key, { timeoutMs: 50 })).rejects.toThrow(CommTimeoutError);
      }
    }
  });

  it('allocates arena regions first fit, page-aligned, merging freed neighbours', () => {
    const regions = new RegionAllocator(10 * 4096, 4096);
    const [a, b, c] = [regions.allocate(1), regions.allocate(4097), regions.allocate(3 * 4096)];
    expect([a, b, c]).toEqual([0, 4096, 3 * 4096]);
    expect(regions.allocate(5 * 4096)).toBeUndefined();
    regions.free(b as number);
    regions.free(a as number);
    // a and b merged into one 3-page region at 0; c's end and the tail stay apart until c is freed.
    expect(regions.allocate(3 * 4096)).toBe(0);
    regions.free(0);
    regions.free(c as number);
    expect(regions.allocate(10 * 4096)).toBe(0);
    expect(() => regions.free(4096)).toThrow(/no region is allocated at offset 4096/);
  });

  it('refuses arena sizes that are not non-negative integers', () => {
    const dir = newJob();
    expect(() => new FileTensorStore({ dir, rank: 0, arenaBytes: -1 })).toThrow(
      /arenaBytes must be a non-negative integer, got -1/,
    );
    expect(() => new FileTensorStore({ dir, rank: 0, maxArenaBytes: 1.5 })).toThrow(
      /maxArenaBytes must be a non-negative integer, got 1\.5/,
    );
  });
});

describe('FileTensorStore failures', () => {
  it('times out naming the key, the rank and what is known about the value', async () => {
    const [p, c, d] = stores(newJob(), 3);
    const never = await c.destGet('never', { timeoutMs: 100 }).catch((e: unknown) => e);
    expect(never).toBeInstanceOf(CommTimeoutError);
    expect((never as Error).message).toBe(
      'destGet("never") timed out after 100 ms on rank 1: no rank has set this key',
    );
    await p.srcSet('slow', Tensor.ones([2]), 3);
    await c.destGet('slow');
    await d.destGet('slow');
    await d.destFinishGet('slow');
    const slow = await p.srcWaitUntilGetFinished('slow', { timeoutMs: 100 }).catch((e: unknown) => e);
    expect(slow).toBeInstanceOf(CommTimeoutError);
    expect((slow as Error).message).toBe(
      'srcWaitUntilGetFinished("slow") timed out after 100 ms on rank 0: 1 of 3 consumers finished ' +
        '(1 got the value and are still reading it, 1 have not got it)',
    );
    // The producer withdrew the value; the late consumer's finish cleans up after itself.
    await c.destFinishGet('slow');
    expect(leftovers(p.dir)).toEqual([]);
  });

  it('wakes pending and later waits with RankFailedError when the job is aborted', async () => {
    const dir = newJob();
    const [p, c] = stores(dir, 2);
    await p.srcSet('held', Tensor.ones([2]), 1);
    const waits = [p.srcWaitUntilGetFinished('held'), c.destGet('never')].map((w) =>
      w.catch((e: unknown) => e),
    );
    await new Promise((r) => setTimeout(r, 50));
    abortJob(dir, { message: 'rank 3 (rank-3) failed: Error: boom', failedRank: 3 });
    abortJob(dir, { message: 'a later failure', failedRank: 2 });
    const late = new FileTensorStore({ dir, rank: 5 });
    opened.push(late);
    for (const error of [...(await Promise.all(waits)), await late.destGet('x').catch((e: unknown) => e)]) {
      expect(error).toBeInstanceOf(RankFailedError);
      expect(error).toMatchObject({ message: 'rank 3 (rank-3) failed: Error: boom', failedRank: 3 });
    }
  });

  it('reports a corrupt header, a bad checksum and a truncated payload, naming key and file, without hanging', async () => {
    const dir = newJob();
    const [p, c] = stores(dir, 2);
    writeFileSync(
      join(dir, 'v.garbage'),
      'this is not a tensor file at all, not even close to one, not at all',
    );
    const garbage = await c.destGet('garbage', { timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(garbage).toBeInstanceOf(FileStoreCorruptError);
    expect((garbage as Error).message).toBe(
      `value file ${join(dir, 'v.garbage')} of key "garbage" is corrupt: bad magic (not a tensorcomm value file)`,
    );

    await p.srcSet('flipped', Tensor.ones([4]), 1);
    const flippedPath = join(dir, 'v.flipped');
    const bytes = readFileSync(flippedPath);
    bytes[20] ^= 1; // the producer rank
    writeFileSync(flippedPath, bytes);
    await expect(c.destGet('flipped', { timeoutMs: 5_000 })).rejects.toThrow(
      /v\.flipped of key "flipped" is corrupt: header checksum mismatch/,
    );

    await p.srcSet('cut', Tensor.ones([1024]), 1);
    truncateSync(join(dir, 'v.cut'), 1000);
    await expect(c.destGet('cut', { timeoutMs: 5_000 })).rejects.toThrow(
      /v\.cut of key "cut" is corrupt: 1000 bytes on disk, the header describes 4224 \(truncated payload\)/,
    );
  });

  it('withdraws the values it published when closed', async () => {
    const dir = newJob();
    const store = new FileTensorStore({ dir, rank: 0 });
    await store.srcSet('mine', Tensor.ones([3]), 2);
    store.close();
    expect(leftovers(dir)).toEqual([]);
  });
});

describe('job directories', () => {
  it('creates a 0700 directory whose name gives back the launcher pid and job id', () => {
    const dir = createJobDirectory({ jobId: 'abc_1-2', root: jobs.root() });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(jobDirectoryInfo(dir)).toEqual({ pid: process.pid, jobId: 'abc_1-2' });
    expect(createJobDirectory({ jobId: 'abc_1-2', root: jobs.root() })).toBe(dir);
    chmodSync(dir, 0o755);
    expect(() => createJobDirectory({ jobId: 'abc_1-2', root: jobs.root() })).toThrow(
      /has mode 0755, expected 0700/,
    );
    expect(() => createJobDirectory({ jobId: '../escape', root: jobs.root() })).toThrow(/jobId must be/);
    removeJobDirectory(dir);
  });

  it('removes a job directory with everything in it, idempotently, and nothing else', async () => {
    const dir = newJob();
    const [p] = stores(dir, 1);
    await p.srcSet('left', Tensor.ones([3]), 1);
    removeJobDirectory(dir);
    removeJobDirectory(dir);
    expect(readdirSync(jobs.root())).not.toContain(dir.split('/').pop());
    expect(() => removeJobDirectory(jobs.root())).toThrow(/not a tensorcomm job directory/);
  });

  it('cleans up directories of dead launchers and keeps live ones', () => {
    const staleRoot = mkdtempSync(join(jobs.root(), 'stale-'));
    const dead = createJobDirectory({ jobId: 'dead', root: staleRoot, pid: deadPid() });
    writeFileSync(join(dead, 'v.k'), 'left by a killed job');
    const live = createJobDirectory({ jobId: 'live', root: staleRoot });
    expect(cleanupStaleJobDirectories(staleRoot)).toEqual([dead]);
    expect(readdirSync(staleRoot)).toEqual([live.split('/').pop()]);
  });

  it('keeps two jobs apart', async () => {
    const [p] = stores(newJob(), 1);
    const [, other] = stores(newJob(), 2);
    await p.srcSet('shared-name', Tensor.ones([1]), 1);
    await expect(other.destGet('shared-name', { timeoutMs: 100 })).rejects.toThrow(
      /no rank has set this key/,
    );
  });
});

describe('FileTensorStore across processes', () => {
  const peer = scriptStart(new URL('./fixtures/file-store.ts', import.meta.url).pathname);

  /** Forks one process per rank of the largest world; each runs every step in order. Resolves to each step's results. */
  async function runPeers(steps: PeerStep[]): Promise<unknown[][]> {
    const worldSize = Math.max(...steps.map((s) => s.worldSize));
    const { path, execArgv } = await peer;
    const ranks = Promise.all(
      Array.from({ length: worldSize }, (_, rank) => {
        const child = fork(path, [String(rank), JSON.stringify(steps)], { execArgv });
        return new Promise<unknown[]>((resolve, reject) => {
          let result: unknown[] | undefined;
          child.on('message', (message) => (result = message as unknown[]));
          child.on('error', reject);
          child.on('exit', (code) =>
            result === undefined ? reject(new Error(`peer ${rank} exited with ${code}`)) : resolve(result),
          );
        });
      }),
    );
    return ranks.then((results) => steps.map((step, i) => results.slice(0, step.worldSize).map((r) => r[i])));
  }

  /**
   * The three scenarios run in one set of processes (four, the largest world),
   * one after the other, each in a job directory of its own; ranks 2 and 3
   * skip the two-rank ones.
   */
  const dirs: Partial<Record<PeerStep['scenario'], string>> = {};
  let results: Partial<Record<PeerStep['scenario'], unknown[]>> = {};
  beforeAll(async () => {
    const steps: PeerStep[] = [
      { scenario: 'ping-pong', dir: newJob(), worldSize: 2 },
      { scenario: 'arena', dir: newJob(), worldSize: 2 },
      { scenario: 'broadcast', dir: newJob(), worldSize: 4 },
    ];
    for (const step of steps) dirs[step.scenario] = step.dir;
    const each = await runPeers(steps);
    results = Object.fromEntries(steps.map((step, i) => [step.scenario, each[i]]));
  }, 120_000); // one run standing for three tests of 60 s each

  it('ping-pongs values between two processes', () => {
    const [ponger, pinger] = results['ping-pong']!;
    const rounds = Array.from({ length: 50 }, (_, i) => i);
    expect(ponger).toEqual(rounds.map((i) => 1000 + i));
    expect(pinger).toEqual(rounds);
    expect(leftovers(dirs['ping-pong']!)).toEqual([]);
  });

  it('keeps several large values intact in a reused arena between two processes', () => {
    const [producer, consumer] = results.arena!;
    expect(producer).toBe('sent');
    expect(consumer).toEqual({ rounds: 8, wrongWords: 0 });
    expect(leftovers(dirs.arena!)).toEqual([]);
  });

  it('broadcasts a 1 MiB value from one process to three others', () => {
    const ranks = results.broadcast!;
    expect(ranks[0]).toEqual(['sent', 'sent', 'sent']);
    const last = (1 << 18) - 1;
    for (const received of ranks.slice(1)) {
      expect(received).toEqual([0, 1, 2].map((round) => ({ tag: `round ${round}`, first: round, last })));
    }
    expect(leftovers(dirs.broadcast!)).toEqual([]);
  });
});
