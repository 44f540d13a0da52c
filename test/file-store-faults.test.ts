/**
 * Faults from outside a FileTensorStore's own calls, each in a child process
 * (test/fixtures/file-store-faults.ts) because they used to be signals that
 * end the process: a truncated arena (SIGBUS), a view read after its get
 * (SIGSEGV). The child must survive, exit 0 and report a clean error or a
 * valid read. Arenas are sealed memory files, which nobody can truncate
 * (file-store-truncation.test.ts); the truncations here are of plain ones
 * (TENSORCOMM_SEALED_FILES=0, the fallback), between two calls. Also: a file
 * planted at a key is reported as what it is.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultStoreRoot } from '../src/file-store/job-directory.ts';
import { SEALED_FILES_ENV } from '../src/file-store/sealed-files.ts';
import { createJobDirectory, FileStoreCorruptError, FileTensorStore, Tensor } from '../src/index.ts';
import type { FaultScenario, scenarios } from './fixtures/file-store-faults.ts';
import { nodeScript } from './fixtures/node-script.ts';

const repo = new URL('..', import.meta.url).pathname;
const fixture = await nodeScript(new URL('./fixtures/file-store-faults.ts', import.meta.url).pathname);
const ELEMENTS = 1 << 18;
const SUM = (ELEMENTS * (ELEMENTS - 1)) / 2;

let root: string;
let jobs = 0;
beforeAll(() => {
  root = mkdtempSync(join(defaultStoreRoot(), 'tensorcomm-faults-test-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const newJob = () => createJobDirectory({ jobId: `f${jobs++}`, root });

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
}

/** Runs one scenario in a child (with `env` added); resolves however it ended, never rejects for its exit. */
async function runScenario(name: FaultScenario, env: Record<string, string>): Promise<Ended> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [...fixture, name, newJob()], {
      cwd: repo,
      timeout: 60_000,
      env: { ...process.env, ...env },
    });
    return { code: 0, signal: null, out: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; signal?: NodeJS.Signals; stdout?: string; stderr?: string };
    return { code: e.code ?? null, signal: e.signal ?? null, out: `${e.stdout}${e.stderr}` };
  }
}

/** The scenario's result, after checking the child lived to print it. */
async function survived<K extends FaultScenario>(
  name: K,
  env: Record<string, string> = {},
): Promise<Awaited<ReturnType<(typeof scenarios)[K]>>> {
  const ended = await runScenario(name, env);
  expect({ code: ended.code, signal: ended.signal }, ended.out).toEqual({ code: 0, signal: null });
  const line = /^result (.*)$/m.exec(ended.out);
  expect(line, ended.out).not.toBeNull();
  return JSON.parse((line as RegExpExecArray)[1]);
}

describe('file store faults from outside its calls', { timeout: 90_000 }, () => {
  const plainFiles = { [SEALED_FILES_ENV]: '0' };

  it('a truncated plain arena a consumer has mapped is a FileStoreCorruptError on its next get, not a SIGBUS', async () => {
    const { truncated, get } = await survived('truncatedArenaAtConsumer', plainFiles);
    expect(truncated).toBeGreaterThan(0);
    expect(get).toMatchObject({ ok: false, name: 'FileStoreCorruptError' });
    expect(get.ok === false && get.message).toMatch(/arena file .* holds 0 bytes, \d+ expected \(truncated/);
  });

  it("a producer's truncated plain arena is a FileStoreCorruptError of its next srcSet, not a SIGBUS", async () => {
    const { truncated, set } = await survived('truncatedArenaAtProducer', plainFiles);
    expect(truncated).toBeGreaterThan(0);
    expect(set).toMatchObject({ ok: false, name: 'FileStoreCorruptError' });
    expect(set.ok === false && set.message).toMatch(/arena file .* holds 0 bytes, \d+ expected \(truncated/);
  });

  it('a mapped value read after destFinishGet reads valid memory (zeros) instead of a SIGSEGV', async () => {
    const { during, after } = await survived('viewAfterFinish');
    expect(during).toBe(SUM);
    expect(after).toEqual({ read: 0 });
  });

  it('an arena view read after its store closed reads valid memory (zeros) instead of a SIGSEGV', async () => {
    const { during, after } = await survived('arenaViewAfterClose');
    expect(during).toBe(SUM);
    expect(after).toEqual({ read: 0 });
  });
});

describe('a key whose path is taken', () => {
  const stores: FileTensorStore[] = [];
  const open = (dir: string, rank: number, maxArenaBytes?: number) => {
    const store = new FileTensorStore({ dir, rank, timeoutMs: 5_000, maxArenaBytes });
    stores.push(store);
    return store;
  };
  afterAll(() => {
    for (const store of stores) store.close();
  });

  it('by a planted file: an unexpected file, not "an earlier value whose consumers have not finished"', async () => {
    const dir = newJob();
    // Longer than a header, so it is its magic number that gives it away.
    writeFileSync(join(dir, 'v.planted'), 'not a tensorcomm value, '.repeat(4));
    const error = await open(dir, 0)
      .srcSet('planted', Tensor.ones([4]), 1)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileStoreCorruptError);
    expect((error as Error).message).toMatch(
      /srcSet\("planted"\): an unexpected file is at this key's path .*v\.planted \(bad magic \(not a tensorcomm value file\)\)/,
    );
    expect((error as Error).message).not.toMatch(/earlier value/);
  });

  it('by a planted directory: named as a directory', async () => {
    const dir = newJob();
    mkdirSync(join(dir, 'v.folder'));
    const error = await open(dir, 0)
      .srcSet('folder', Tensor.ones([4]), 1)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileStoreCorruptError);
    expect((error as Error).message).toMatch(/an unexpected file is at this key's path .* \(a directory\)/);
  });

  it.each([
    ['small', 4],
    ['large (a link to its sealed memory file)', 1 << 18],
  ])("by another rank's %s value still being read: the earlier value, naming its producer", async (_, n) => {
    const dir = newJob();
    // Without arenas, a large value is a value file of its own.
    await open(dir, 1, 0).srcSet('shared', Tensor.ones([n]), 1);
    const error = await open(dir, 0)
      .srcSet('shared', Tensor.ones([n]), 1)
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(
      /srcSet\("shared"\): key is still held by an earlier value \(set by rank 1\) whose consumers have not finished/,
    );
  });
});
