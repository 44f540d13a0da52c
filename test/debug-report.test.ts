import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { spawnThreads } from '../src/index.ts';
import type { scenarios } from './fixtures/debug-report.ts';
import { MEDIA } from './fixtures/media.ts';
import { type Outcome, scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/debug-report.ts', import.meta.url));
type Failed = Extract<Outcome, { ok: false }>;

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-debug-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * writeHangReport and the flight recorder of size 3 share one job: report-file,
 * then recorder (report-file's allReduce and barrier are the world's calls #0
 * and #1). Started by whichever of their tests runs first; its directory lives
 * until all tests are done.
 */
const reportDir = mkdtempSync(join(tmpdir(), 'tensorcomm-debug-'));
afterAll(() => rmSync(reportDir, { recursive: true, force: true }));
let reportAndRecorder: ReturnType<typeof runReportAndRecorder> | undefined;
const runReportAndRecorder = () =>
  fixture.runSteps(
    ['report-file', 'recorder'],
    (entry, args) => spawnThreads(entry, { worldSize: 2, args, debug: { flightRecorderSize: 3 } }),
    { dir: reportDir },
  );
const sharedJob = () => (reportAndRecorder ??= runReportAndRecorder());

describe('hang report', () => {
  it('a slow rank: the timeout lists every rank, who has not arrived, and where each one is', async () => {
    const outcomes = await fixture.run('hang', (entry, args) => spawnThreads(entry, { worldSize: 3, args }));
    expect(outcomes[2].ok).toBe(true);
    for (const rank of [0, 1]) {
      const o = outcomes[rank] as Failed;
      expect(o.name).toBe('CommTimeoutError');
      const m = o.message;
      expect(m).toMatch(
        /allReduce\(float32\[4\], sum\) call #1 on group "world": rank \d timed out after 800 ms waiting for group rank 2 \(global rank 2\)\nhang report \(rank \d, after waiting 800\.0 ms\):/,
      );
      // The user's terms only: no store key of the exchange under the call.
      expect(m).not.toMatch(/destGet\(/);
      expect(m).toContain('ranks that have not arrived at call #1 on group "world": 2');
      expect(m).toMatch(
        /rank 2: running its own code \(in no call\); last completed barrier #0 on group "world"/,
      );
      // The reporting rank says what it waits in, for whom, and from where it called it. (Its fellow
      // waiter may have timed out a moment before: then it is in no call, its allReduce ended.)
      expect(m).toMatch(
        new RegExp(
          `rank ${rank}: 1 call\\(s\\) pending[^\\n]*\\n\\s+allReduce\\(float32\\[4\\], sum\\) #1 on group "world" for [^\\n]*, waiting for group rank 2 \\(global rank 2\\) \\(called at .*debug-report\\.ts:\\d+`,
        ),
      );
      expect(m).toMatch(/flight recorder of rank \d \(last \d+ of \d+ calls\):/);
      expect(m).toMatch(/allReduce\(float32\[4\], sum\) #1 on group "world": pending for/);
    }
  });

  it.each(MEDIA)(
    'hangReportDir, %s: the report also goes to a file, whose path the error gives',
    async (_medium, launch) => {
      const dir = tempDir();
      const outcomes = await fixture.run('hang-file', (entry, args) =>
        launch(entry, 2, { args, debug: { hangReportDir: dir } }),
      );
      const message = (outcomes[0] as Failed).message;
      const file = /hang report written to ([^)]+)\)/.exec(message)?.[1];
      expect(file).toBeDefined();
      expect(readdirSync(dir)).toEqual([expect.stringMatching(/^hang-rank0-\d+\.txt$/)]);
      const text = readFileSync(file!, 'utf8');
      expect(text).toContain('ranks that have not arrived at call #1 on group "world": 1');
    },
  );

  it('writeHangReport on demand', async () => {
    const dir = reportDir;
    const files = (await sharedJob())['report-file'];
    expect(readdirSync(dir).sort()).toEqual(files.map((f) => f.slice(dir.length + 1)).sort());
    const text = readFileSync(files[1], 'utf8');
    expect(text).toMatch(/^rank 0: /m);
    expect(text).toMatch(/^rank 1: /m);
    expect(text).toContain('flight recorder of rank 1:');
    expect(text).toMatch(/allReduce\(float32\[4\], sum\) #0 on group "world": ok in/);
  });
});

describe('flight recorder', () => {
  it('keeps the last flightRecorderSize calls, oldest first, with call sites', async () => {
    const results = (await sharedJob()).recorder;
    for (const [rank, { entries, text, ranks }] of results.entries()) {
      // Calls #4 to #6: the recorder scenario's allReduces were #2 to #4 (after report-file's two calls).
      expect(entries.map((e) => [e.op, e.seq, e.status])).toEqual([
        ['allReduce', 4, 'ok'],
        ['broadcast', 5, 'ok'],
        ['barrier', 6, 'ok'],
      ]);
      expect(entries[0]).toMatchObject({
        rank,
        group: 'world',
        call: 'allReduce(float32[4], sum)',
        bytes: 16,
      });
      expect(entries[1].endUs).toBeGreaterThanOrEqual(entries[1].startUs);
      expect(entries[1].site).toMatch(/debug-report\.ts:\d+/);
      expect(text.split('\n')).toHaveLength(3);
      expect(text).toMatch(/^broadcast\(float32\[2\], src=0\) #5 on group "world": ok in/m);
      expect(ranks).toMatch(/^rank 0: /m);
    }
  });

  it('size 0 turns it off; bad options are errors naming them', async () => {
    const results = await fixture.run('recorder', (entry, args) =>
      spawnThreads(entry, { worldSize: 2, args, debug: { flightRecorderSize: 0 } }),
    );
    expect(results[0].entries).toEqual([]);
    await expect(
      spawnThreads(fixture.entry, { worldSize: 1, debug: { flightRecorderSize: -1 } }),
    ).rejects.toThrow(/spawnThreads: debug: flightRecorderSize must be an integer/);
    await expect(
      spawnThreads(fixture.entry, { worldSize: 1, debug: { check: true } as unknown as { checks: boolean } }),
    ).rejects.toThrow(/unknown option "check"/);
  });
});
