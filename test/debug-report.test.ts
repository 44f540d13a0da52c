import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CallEntry, spawnThreads } from '../src/index.ts';
import type { Outcome } from './fixtures/debug-mismatch.ts';
import { MEDIA } from './fixtures/media.ts';

const entry = new URL('./fixtures/debug-mismatch.ts', import.meta.url);
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

describe('hang report', () => {
  it('a slow rank: the timeout lists every rank, who has not arrived, and where each one is', async () => {
    const outcomes = await spawnThreads<Outcome>(entry, { worldSize: 3, args: { scenario: 'hang' } });
    expect(outcomes[2].ok).toBe(true);
    for (const rank of [0, 1]) {
      const o = outcomes[rank] as Failed;
      expect(o.name).toBe('CommTimeoutError');
      const m = o.message;
      expect(m).toMatch(
        /allReduce\(float32\[4\], sum\) call #1 on group "world": rank \d timed out after 800 ms waiting for group rank 2 \(global rank 2\)\. destGet\("[^"]+"\) timed out after 800 ms on rank \d: no rank has set this key/,
      );
      expect(m).toContain('ranks that have not arrived at call #1 on group "world": 2');
      expect(m).toMatch(
        /rank 2: running its own code \(in no call\); last completed barrier #0 on group "world"/,
      );
      // The waiting ranks say what they wait in, for whom, and from where they called it.
      expect(m).toMatch(
        /rank 0: 1 call\(s\) pending[^\n]*\n\s+allReduce\(float32\[4\], sum\) #1 on group "world" for [^\n]*waiting for group rank 2 \(global rank 2\) \(called at .*debug-mismatch\.ts:\d+/,
      );
      expect(m).toMatch(/flight recorder of rank \d \(last \d+ of \d+ calls\):/);
      expect(m).toMatch(/allReduce\(float32\[4\], sum\) #1 on group "world": pending for/);
    }
  });

  it.each(MEDIA)(
    'hangReportDir, %s: the report also goes to a file, whose path the error gives',
    async (_medium, launch) => {
      const dir = tempDir();
      const outcomes = await launch<Outcome>(entry, 2, {
        args: { scenario: 'hang-file' },
        debug: { hangReportDir: dir },
      });
      const message = (outcomes[0] as Failed).message;
      const file = /hang report written to ([^)]+)\)/.exec(message)?.[1];
      expect(file).toBeDefined();
      expect(readdirSync(dir)).toEqual([expect.stringMatching(/^hang-rank0-\d+\.txt$/)]);
      const text = readFileSync(file!, 'utf8');
      expect(text).toContain('ranks that have not arrived at call #1 on group "world": 1');
    },
  );

  it('writeHangReport on demand', async () => {
    const dir = tempDir();
    const files = await spawnThreads<string>(entry, { worldSize: 2, args: { scenario: 'report-file', dir } });
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
    const results = await spawnThreads<{ entries: CallEntry[]; text: string; ranks: string }>(entry, {
      worldSize: 2,
      args: { scenario: 'recorder' },
      debug: { flightRecorderSize: 3 },
    });
    for (const [rank, { entries, text, ranks }] of results.entries()) {
      expect(entries.map((e) => [e.op, e.seq, e.status])).toEqual([
        ['allReduce', 2, 'ok'],
        ['broadcast', 3, 'ok'],
        ['barrier', 4, 'ok'],
      ]);
      expect(entries[0]).toMatchObject({
        rank,
        group: 'world',
        call: 'allReduce(float32[4], sum)',
        bytes: 16,
      });
      expect(entries[1].endUs).toBeGreaterThanOrEqual(entries[1].startUs);
      expect(entries[1].site).toMatch(/debug-mismatch\.ts:\d+/);
      expect(text.split('\n')).toHaveLength(3);
      expect(text).toMatch(/^broadcast\(float32\[2\], src=0\) #3 on group "world": ok in/m);
      expect(ranks).toMatch(/^rank 0: /m);
    }
  });

  it('size 0 turns it off; bad options are errors naming them', async () => {
    const results = await spawnThreads<{ entries: CallEntry[] }>(entry, {
      worldSize: 2,
      args: { scenario: 'recorder' },
      debug: { flightRecorderSize: 0 },
    });
    expect(results[0].entries).toEqual([]);
    await expect(spawnThreads(entry, { worldSize: 1, debug: { flightRecorderSize: -1 } })).rejects.toThrow(
      /spawnThreads: debug: flightRecorderSize must be an integer/,
    );
    await expect(
      spawnThreads(entry, { worldSize: 1, debug: { check: true } as unknown as { checks: boolean } }),
    ).rejects.toThrow(/unknown option "check"/);
  });
});
