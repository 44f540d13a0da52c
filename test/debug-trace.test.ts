import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { traceCommand } from '../src/cli/trace.ts';
import type { ChromeTrace, ChromeTraceEvent } from '../src/debug/trace.ts';
import { spawnThreads } from '../src/index.ts';
import type { scenarios } from './fixtures/debug-trace.ts';
import { MEDIA } from './fixtures/media.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/debug-trace.ts', import.meta.url));
const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-trace-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  delete process.env.TENSORCOMM_TRACE;
});

function calls(trace: ChromeTrace, rank: number): ChromeTraceEvent[] {
  return trace.traceEvents.filter((e) => e.ph === 'X' && e.tid === rank);
}

function checkTrace(trace: ChromeTrace, worldSize: number): void {
  const tracks = trace.traceEvents.filter((e) => e.ph === 'M' && e.name === 'thread_name');
  expect(tracks.map((t) => [t.tid, t.args.name])).toEqual(
    Array.from({ length: worldSize }, (_, r) => [r, `rank ${r}`]),
  );
  for (let rank = 0; rank < worldSize; rank++) {
    const ops = calls(trace, rank).map((e) => e.name);
    // The start-up barrier, then the fixture's calls in order.
    const p2p = rank === 0 ? ['send'] : rank === 1 ? ['recv'] : [];
    expect(ops).toEqual(['barrier', 'allReduce', 'allGatherInto', ...p2p, 'barrier']);
    for (const e of calls(trace, rank)) {
      expect(e.ts).toBeGreaterThan(0);
      expect(e.dur).toBeGreaterThanOrEqual(0);
      expect(e.args.status).toBe('ok');
    }
    const allReduce = calls(trace, rank).find((e) => e.name === 'allReduce')!;
    expect(allReduce.args).toMatchObject({
      call: 'allReduce(float32[256], sum)',
      seq: 0,
      group: 'world',
      bytes: 1024,
    });
    expect(allReduce.args.peers).toEqual([0, 1, 2].filter((r) => r !== rank));
  }
  const send = calls(trace, 0).find((e) => e.name === 'send')!;
  expect(send.args).toMatchObject({ bytes: 64, peers: [1], call: 'send(float32[16], dst=1, tag=0)' });
  const summary = new Map(trace.otherData.summary.map((row) => [row.op, row]));
  expect(summary.get('allReduce')).toMatchObject({ count: worldSize, bytes: 1024 * worldSize });
  expect(summary.get('barrier')).toMatchObject({ count: 2 * worldSize, bytes: 0, busbw: 0 });
  expect(summary.get('send')).toMatchObject({ count: 1, bytes: 64 });
  expect(summary.get('allReduce')!.busbw).toBeGreaterThan(0);
  // Every rank's network bytes, beside the summary: none on one machine (shared memory is not the network).
  const noNetwork = { sentBytes: 0, receivedBytes: 0, peers: {} };
  expect(trace.otherData.network).toEqual(
    Object.fromEntries(Array.from({ length: worldSize }, (_, r) => [r, noNetwork])),
  );
}

describe('traces', () => {
  it.each(MEDIA)(
    'DebugOptions.trace (a .json path), %s: one file, one track per rank with its calls, and a summary',
    async (_medium, launch) => {
      const file = join(tempDir(), 'nested', 'job.json');
      await fixture.run('traced', (entry, args) => launch(entry, 3, { args, debug: { trace: file } }));
      checkTrace(JSON.parse(readFileSync(file, 'utf8')) as ChromeTrace, 3);
      // The ranks' parts were merged and removed.
      expect(readdirSync(join(file, '..'))).toEqual(['job.json']);
    },
  );

  it('TENSORCOMM_TRACE=<dir>: a new file in that directory; `tensorcomm trace` prints its summary table', async () => {
    const dir = tempDir();
    process.env.TENSORCOMM_TRACE = dir;
    await fixture.run('traced', (entry, args) => spawnThreads(entry, { worldSize: 3, args }));
    const files = readdirSync(dir);
    expect(files).toEqual([expect.stringMatching(/^tensorcomm-trace-.*\.json$/)]);
    const file = join(dir, files[0]);
    checkTrace(JSON.parse(readFileSync(file, 'utf8')) as ChromeTrace, 3);

    const lines: string[] = [];
    expect(await traceCommand([file], (line) => lines.push(line))).toBe(0);
    expect(lines[0]).toMatch(/3 ranks, 14 calls \(0 dropped\)/);
    expect(lines[1].slice(1).trim().split(/\s+/)).toEqual([
      'op',
      'count',
      'bytes',
      'total(ms)',
      'busbw(GB/s)',
    ]);
    const allReduce = lines
      .find((l) => l.trim().startsWith('allReduce'))!
      .trim()
      .split(/\s+/);
    expect(allReduce.slice(0, 3)).toEqual(['allReduce', '3', '3072']);
    expect(await traceCommand([join(dir, 'missing.json')], () => {})).toBe(1);
  });

  it('no trace unless asked', async () => {
    const dir = tempDir();
    await fixture.run('report-file', (entry, args) => spawnThreads(entry, { worldSize: 2, args }), { dir });
    expect(readdirSync(dir).every((f) => f.startsWith('hang-rank'))).toBe(true);
  });
});
