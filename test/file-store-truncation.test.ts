/**
 * A file of the job directory truncated while ranks hold views of it (issue
 * 40): a read of a mapped page past the end of its file is a SIGBUS, which
 * kills the process. Every file ranks map is a sealed memory file
 * (src/file-store/sealed-files.ts), so the truncation is refused and the
 * views keep their values, on thread ranks (run in a child process, where a
 * SIGBUS would end the child, not the test runner) and on process ranks
 * (a SIGBUS would fail the job, naming the signal). The same scenario on
 * plain files (TENSORCOMM_SEALED_FILES=0) is a SIGBUS: the fallback's
 * documented limit, and the proof that the scenario reads truncated pages.
 */
import { describe, expect, it } from 'vitest';
import { makesSealedFiles, SEALED_FILES_ENV } from '../src/file-store/sealed-files.ts';
import { launchProcesses } from '../src/index.ts';
import { cleanEnv, runCollecting } from './fixtures/child-run.ts';
import { expectedSum, type RankReport } from './fixtures/file-store-truncation.ts';
import { nodeScript } from './fixtures/node-script.ts';
import { storeJobs } from './fixtures/store-jobs.ts';

const fixture = new URL('./fixtures/file-store-truncation.ts', import.meta.url);
const threadRanks = await nodeScript(fixture.pathname);
const { newJob } = storeJobs('truncation');
/** The files ranks map: arenas, ring inboxes, and the value file too large to read whole. */
const MAPPED = /^(tmp\/arena\.0\.[0-9a-f]+\.0|tmp\/rings\.[01]|v\.in-file)$/;

/** Runs the scenario's two ranks as threads of a child process with `env`; how it ended and what it printed. */
function runThreadRanks(env: Record<string, string> = {}) {
  return runCollecting(process.execPath, [...threadRanks, newJob()], {
    env: { ...cleanEnv(), ...env },
    timeout: 40_000,
  });
}

function expectSurvived(reports: RankReport[]): void {
  for (const [rank, { truncations }] of reports.entries()) {
    const mapped = truncations.filter((t) => MAPPED.test(t.file));
    // Each rank found every mapped file, and could change none of them.
    expect(mapped.map((t) => t.file.replace(/\.[0-9a-f]+\.0$/, '')).sort(), `rank ${rank}`).toEqual([
      'tmp/arena.0',
      'tmp/rings.0',
      'tmp/rings.1',
      'v.in-file',
    ]);
    for (const t of mapped)
      expect(t, `rank ${rank}`).toMatchObject({ truncate: 'EPERM', openTruncating: 'EPERM' });
  }
  expect(reports[0].sums).toEqual({ back: 5 });
  expect(reports[1].sums).toEqual({
    'in-arena': expectedSum(1),
    'on-ring': expectedSum(2),
    'in-file': expectedSum(3),
    again: expectedSum(4),
  });
}

describe.skipIf(!makesSealedFiles())(
  'truncating the files ranks map while they hold views',
  { timeout: 60_000 },
  () => {
    it('thread ranks: the truncations are refused; views, arenas and rings keep their values', async () => {
      const run = await runThreadRanks();
      expect({ code: run.code, signal: run.signal }, run.out).toEqual({ code: 0, signal: null });
      const line = /^result (.*)$/m.exec(run.out);
      expect(line, run.out).not.toBeNull();
      expectSurvived(JSON.parse((line as RegExpExecArray)[1]));
    });

    it("process ranks: the same, each rank truncating the other process's files", async () => {
      const reports = await launchProcesses<RankReport>(fixture, {
        nproc: 2,
        args: { dir: newJob() },
        timeoutMs: 40_000,
        output: () => {},
      });
      expectSurvived(reports);
    });

    it(`with ${SEALED_FILES_ENV}=0 (plain files) the same truncations are a SIGBUS: the fallback's limit`, async () => {
      const run = await runThreadRanks({ [SEALED_FILES_ENV]: '0' });
      expect(run.signal, run.out).toBe('SIGBUS');
    });
  },
);
