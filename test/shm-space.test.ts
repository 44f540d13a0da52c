/**
 * A machine whose /dev/shm is too small (Docker's default is 64 MiB): a
 * private mount namespace with an 8 MiB tmpfs there (test/fixtures/
 * shm-space-namespace.ts). Large values need room there only as plain
 * files (TENSORCOMM_SEALED_FILES=0: the files ranks map are otherwise sealed
 * memory files, which take none of it), and only where ranks cannot copy
 * from each other's memory (TENSORCOMM_CMA=0) or as a reduction's inputs
 * where it has room to spare. Values that do not fit are a ShmSpaceError of
 * the call that wanted the room, never a SIGBUS; the launcher exits 1 with the
 * ranks' errors and removes the job directory, also when the file system is
 * so full that its abort record does not fit; TENSORCOMM_SHM_DIR moves the
 * job directories somewhere roomier.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crossMemory } from '../src/file-store/cross-memory.ts';
import { defaultStoreRoot } from '../src/file-store/job-directory.ts';
import { makesSealedFiles, SEALED_FILES_ENV } from '../src/file-store/sealed-files.ts';
import '../src/index.ts';
import { nodeScript } from './fixtures/node-script.ts';
import { canMakeNamespaces, runWithSmallShm, tensorcommRun } from './fixtures/shm-space-namespace.ts';

const cwd = new URL('..', import.meta.url).pathname;
const SCRIPT = 'test/fixtures/shm-space.ts';
const FULL = 'test/fixtures/shm-space-full.ts';
/** Arenas and large value files as plain files of the job directory, which take room there. */
const PLAIN = `${SEALED_FILES_ENV}=0`;
/** Prints the launcher's exit status (a signal death reads 128 + its number) and what it left in /dev/shm. */
const report = ['echo "exit $?"', 'echo "left in /dev/shm: [$(ls -A /dev/shm)]"'];

const exitOf = (out: string) => /^exit (\d+)$/m.exec(out)?.[1];
const results = (out: string) =>
  [...out.matchAll(/^\[rank (\d)\] result (.*)$/gm)].map((m) => JSON.parse(m[2]));

describe('TENSORCOMM_SHM_DIR', () => {
  it('must name a directory: otherwise job creation fails naming the variable and its value', () => {
    const before = process.env.TENSORCOMM_SHM_DIR;
    process.env.TENSORCOMM_SHM_DIR = join(tmpdir(), 'tensorcomm-no-such-dir');
    try {
      expect(() => defaultStoreRoot()).toThrow(
        /^TENSORCOMM_SHM_DIR=.*tensorcomm-no-such-dir is not a directory; create it or unset TENSORCOMM_SHM_DIR$/,
      );
    } finally {
      if (before === undefined) delete process.env.TENSORCOMM_SHM_DIR;
      else process.env.TENSORCOMM_SHM_DIR = before;
    }
  });
});

if (!canMakeNamespaces) {
  console.warn(
    'shm-space.test.ts: skipped, this machine cannot make mount namespaces (needs root and unshare -m)',
  );
}

describe.skipIf(!canMakeNamespaces)('an 8 MiB /dev/shm', { timeout: 180_000 }, () => {
  let roomy: string;
  beforeAll(() => {
    roomy = mkdtempSync(join(tmpdir(), 'tensorcomm-roomy-shm-'));
  });
  afterAll(() => rmSync(roomy, { recursive: true, force: true }));

  it('a 64 MiB send through plain arenas fails its ranks with ShmSpaceError; the launcher exits 1, leaves nothing', async () => {
    const run = await runWithSmallShm(
      [`${PLAIN} TENSORCOMM_CMA=0 ${tensorcommRun(['--nproc', '2', SCRIPT, 'bigSend'])}`, ...report],
      { cwd, shmSize: '8m' },
    );
    expect(exitOf(run.out), run.out).toBe('1');
    expect(run.out).toMatch(/tensorcomm run: 2 rank\(s\) failed: (0, 1|1, 0)/);
    expect(run.out).toMatch(
      /rank 0 \(rank-0\): ShmSpaceError: srcSet\(.*\): no space for 64\.0 MiB \(67108864 bytes\) in \/dev\/shm\/tensorcomm-job-[^ ]+ \([\d.]+ MiB \(\d+ bytes\) free\)\. .*--shm-size.*TENSORCOMM_SHM_DIR/,
    );
    expect(run.out).toMatch(/rank 1 \(rank-1\): RankFailedError: .*ShmSpaceError/);
    expect(run.out).toContain('left in /dev/shm: []');
  });

  it.skipIf(!makesSealedFiles())(
    'through sealed arenas, the same send needs no room in /dev/shm',
    async () => {
      const run = await runWithSmallShm(
        [`TENSORCOMM_CMA=0 ${tensorcommRun(['--nproc', '2', SCRIPT, 'bigSend'])}`, ...report],
        { cwd, shmSize: '8m' },
      );
      expect(exitOf(run.out), run.out).toBe('0');
      expect(results(run.out), run.out).toHaveLength(2);
      expect(run.out).toContain('left in /dev/shm: []');
    },
  );

  it.skipIf(crossMemory() === undefined)(
    'where ranks copy from each other, the same send needs no room in /dev/shm',
    async () => {
      const run = await runWithSmallShm([tensorcommRun(['--nproc', '2', SCRIPT, 'bigSend']), ...report], {
        cwd,
        shmSize: '8m',
      });
      expect(exitOf(run.out), run.out).toBe('0');
      expect(results(run.out), run.out).toHaveLength(2);
      expect(run.out).toContain('left in /dev/shm: []');
    },
  );

  it.skipIf(crossMemory() === undefined)(
    'an allReduce lends its inputs from shared memory only with room to spare: here it copies them, and works',
    async () => {
      const run = await runWithSmallShm([tensorcommRun(['--nproc', '2', SCRIPT, 'allReduce']), ...report], {
        cwd,
        shmSize: '8m',
      });
      expect(exitOf(run.out), run.out).toBe('0');
      // Its 2 MiB inputs would fit in the 8 MiB, but lending leaves a small /dev/shm alone: no arena file.
      expect(results(run.out), run.out).toEqual([{ arenaFiles: [] }, { arenaFiles: [] }]);
      expect(run.out).toContain('left in /dev/shm: []');
    },
  );

  it('with TENSORCOMM_SHM_DIR on a roomier file system the same send works, its job directory there', async () => {
    const run = await runWithSmallShm(
      [
        `${PLAIN} TENSORCOMM_CMA=0 TENSORCOMM_SHM_DIR='${roomy}' ${tensorcommRun(['--nproc', '2', SCRIPT, 'bigSend'])}`,
        ...report,
      ],
      { cwd, shmSize: '8m', roomyDir: roomy },
    );
    expect(exitOf(run.out), run.out).toBe('0');
    const dirs = results(run.out).map((r: { storeDir: string }) => r.storeDir);
    expect(dirs, run.out).toHaveLength(2);
    for (const dir of dirs) expect(dir.startsWith(`${roomy}/tensorcomm-job-`), dir).toBe(true);
    expect(run.out).toContain('left in /dev/shm: []');
    expect(readdirSync(roomy)).toEqual([]);
  });

  it('a rank that fills the file system: the launcher still aborts the job, exits 1, removes the directory', async () => {
    const run = await runWithSmallShm([tensorcommRun(['--nproc', '2', SCRIPT, 'fillThenFail']), ...report], {
      cwd,
      shmSize: '8m',
    });
    expect(exitOf(run.out), run.out).toBe('1');
    expect(run.out).toMatch(/tensorcomm run: 2 rank\(s\) failed: (0, 1|1, 0)/);
    // Its own error, not a status row's write that found no room, is what the job reports.
    expect(run.out).toMatch(/rank 0 .*rank 0 filled the job directory and fails on purpose/);
    expect(run.out).not.toMatch(/ENOSPC|abortJob|Uncaught|node:internal/);
    expect(run.out).toContain('left in /dev/shm: []');
  });

  it('on a full file system abortJob records the abort without throwing, and srcSet of plain files is a ShmSpaceError', async () => {
    const full = (await nodeScript(FULL)).join(' ');
    const node = (scenario: string) => `node ${full} ${scenario}`;
    const run = await runWithSmallShm([node('abort'), `${PLAIN} ${node('set')}`, ...report], {
      cwd,
      shmSize: '8m',
    });
    const [abort, sets] = [...run.out.matchAll(/^result (.*)$/gm)].map((m) => JSON.parse(m[1]));
    expect(abort, run.out).toEqual({
      recorded: true,
      abort: expect.stringMatching(
        /^job aborted \(its abort record could not be written: is the file system of/,
      ),
    });
    expect(sets, run.out).toHaveLength(2);
    for (const set of sets) {
      expect(set).toMatchObject({ ok: false, name: 'ShmSpaceError' });
      expect(set.message).toMatch(
        /no space for 1\.0 MiB \(\d+ bytes\) in \/dev\/shm\/tensorcomm-job-.* \(0 bytes free\)/,
      );
    }
    expect(run.out).toContain('left in /dev/shm: []');
  });
});
