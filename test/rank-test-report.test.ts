/**
 * How a failing rankTest is reported: the rank tests of test/fixtures/rank-test-failing.ts
 * and rank-test-only.ts fail (or are skipped) on purpose in a vitest of their own, whose
 * reporter writes what vitest made of each failure to a file this test reads.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReportedTest } from './fixtures/rank-test-reporter.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-rank-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let tests: ReportedTest[];
let stderr: string;
beforeAll(async () => {
  const report = join(dir, 'report.json');
  // The run fails (its tests do, on purpose): what counts is the report it wrote, and what it printed.
  const run = await promisify(execFile)(
    process.execPath,
    [
      join(ROOT, 'node_modules/vitest/vitest.mjs'),
      'run',
      '--config',
      'test/fixtures/rank-test-vitest.config.ts',
    ],
    { cwd: ROOT, env: { ...process.env, RANK_TEST_REPORT: report }, timeout: 240_000 },
  ).catch((error: { code?: unknown; stderr?: string }) => {
    if (typeof error.code !== 'number') throw error;
    return { stderr: error.stderr ?? '' };
  });
  stderr = run.stderr;
  tests = JSON.parse(readFileSync(report, 'utf8')) as ReportedTest[];
}, 300_000);

/** A test's state; a state other than the one expected fails with the errors the run reported for it. */
function expectState(name: string, state: string): void {
  const test = reported(name);
  expect(test.state, `"${name}" is ${test.state}: ${JSON.stringify(test.errors, null, 2)}`).toBe(state);
}

function reported(name: string): ReportedTest {
  const test = tests.find((t) => t.name === name);
  if (!test) throw new Error(`no test "${name}" in the report: ${tests.map((t) => t.name).join(', ')}`);
  return test;
}

/** The ranks the errors name, in order: each failing rank must be named once. */
function ranksNamed(test: ReportedTest): number[] {
  return test.errors.map((e) => Number(/^rank (\d+): /.exec(e.message)?.[1]));
}

describe('a failing rank test', () => {
  it('prints no warning of Node (a deprecated module hook, say) on the way', () => {
    expect(stderr).not.toMatch(/Warning/);
  });

  it('names each failing rank once, with its diff and its line in the test file', () => {
    const test = reported('two ranks see the wrong sum');
    expect(test.state).toBe('failed');
    expect(ranksNamed(test).sort()).toEqual([1, 3]);
    for (const error of test.errors) {
      expect(error.name).toBe('AssertionError');
      expect(error.message).toMatch(/^rank [13]: expected \[ 6, 6 \] to deeply equal \[ 7, 7 \]$/);
      expect(error.diff).toMatch(/- Expected[\s\S]*\+ Received[\s\S]*-\s+7,[\s\S]*\+\s+6,/);
      expect(error.stack).toMatch(/^AssertionError: rank [13]: expected/);
      expect(error.stack).toMatch(/rank-test-failing\.ts:15:\d+/);
    }
  });

  it('a rank stopped by another one failing gets one line, the rank that failed its error and line', () => {
    const test = reported('one rank throws while the others wait for it');
    // The rank that failed first, then the others in the order they stopped.
    const [first, ...others] = ranksNamed(test);
    expect(first).toBe(1);
    expect(others.sort()).toEqual([0, 2]);
    const [root, ...echoes] = test.errors;
    expect(root.message).toBe('rank 1: boom on rank 1');
    expect(root.stack).toMatch(/rank-test-failing\.ts:19:\d+/);
    for (const echo of echoes) {
      expect(echo.name).toBe('RankFailedError');
      expect(echo.message).toMatch(/^rank [02]: [^\n]*rank 1 \(rank-1\) failed: Error: boom on rank 1$/);
    }
  });

  it('a ReferenceError says what a body can use', () => {
    const test = reported('a body uses what the rank thread does not have');
    expect(ranksNamed(test).sort()).toEqual([0, 1]);
    for (const error of test.errors) {
      expect(error.message).toMatch(
        /expectTypeOfGlobal is not defined\n\(a rankTest body runs in each rank thread/,
      );
      expect(error.message).toMatch(/not a variable of an enclosing function/);
    }
  });

  it('a fault that never fired fails the test', () => {
    const test = reported('a fault that never fires');
    const cause =
      'faults[0] (rank 0, nth 5 of its communication calls, throw) never fired: rank 0 made fewer such calls before its body returned';
    const [root, ...others] = test.errors.map((e) => e.message);
    expect(root).toBe(`rank 0: ${cause}`);
    // Rank 1 may still be finishing its job when rank 0 fails (its body returned, it had not reported):
    // then it stops, saying in one line that rank 0 failed.
    for (const other of others)
      expect(other).toBe(`rank 1: rank 0 (rank-0) failed: UnfinishedWorkError: ${cause}`);
  });

  it('ranks that time out print the hang report once, in their terms', () => {
    const test = reported('two ranks time out on a third');
    expect(ranksNamed(test).sort()).toEqual([0, 1]);
    const all = test.errors.map((e) => `${e.message}\n${e.stack}`).join('\n');
    // tensorcomm's frames in the rank bundle point into temporary files (its chunks have no source map).
    expect(all).not.toContain('tensorcomm-bundles-');
    const first = test.errors[0];
    expect(first.message).toMatch(
      /^rank [01]: allReduce\(float32\[4\], sum\) call #0 on group "world": rank [01] timed out after 500 ms waiting for group rank 2 \(global rank 2\)\nhang report \(rank [01], after waiting 500\.0 ms\):\nranks that have not arrived at call #0 on group "world": 2\n/,
    );
    expect(first.message).toMatch(/rank 2: running its own code/);
    // The other rank timed out too and points at the report, or, when the first one's timeout reached
    // it before its own timer fired (threads start apart on a loaded machine), fails naming that rank.
    expect(test.errors[1].message).toMatch(
      /\n\(hang report: see rank [01]'s above\)$|^rank [01]: rank [01] \(rank-[01]\) failed: CommTimeoutError: allReduce\(float32\[4\], sum\) call #0 on group "world": rank [01] timed out after 500 ms waiting for group rank 2/,
    );
    expect(all.match(/hang report \(rank/g), all).toHaveLength(2);
    // No store keys, no internal tags.
    expect(all).not.toMatch(/destGet|srcWaitUntilGetFinished|no rank has set this key/);
  });
});

describe('only and skip', () => {
  it('rankTest.skip is reported skipped, and its body does not run', () => {
    expectState('a skipped test does not run', 'skipped');
  });

  it('rankTest.only runs alone in its file', () => {
    expectState('marked only', 'passed');
    expectState('not marked only', 'skipped');
  });
});
