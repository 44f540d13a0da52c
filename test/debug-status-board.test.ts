import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FileStatusBoard } from '../src/debug/file-status-board.ts';
import { describeRanks } from '../src/debug/hang-report.ts';
import { HEARTBEAT_MS, NOT_RESPONDING_MS, silentFor } from '../src/debug/liveness.ts';
import { RankMonitor, rankMonitor, setRankMonitor } from '../src/debug/monitor.ts';
import { resolveDebugOptions } from '../src/debug/options.ts';
import { installProcessMonitor } from '../src/debug/process-monitor.ts';
import { type StatusBoard, ThreadStatusBoard } from '../src/debug/status-board.ts';
// Registers the op names the status board shows, as every program's ThreadGroup does.
import '../src/thread-group/ops.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Two ranks' monitors over boards that share state (one SharedArrayBuffer, or one directory). */
function boards(kind: 'thread' | 'file'): [StatusBoard, StatusBoard] {
  if (kind === 'thread') {
    const shared = ThreadStatusBoard.createShared(2);
    return [new ThreadStatusBoard(shared), new ThreadStatusBoard(shared)];
  }
  const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-status-'));
  dirs.push(dir);
  return [new FileStatusBoard(dir, 2, 0), new FileStatusBoard(dir, 2, 1)];
}

describe.each(['thread', 'file'] as const)('%s status board', (kind) => {
  it('a rank sees where its peer is, what it waits for, how it failed and when it left', async () => {
    const [b0, b1] = boards(kind);
    const options = resolveDebugOptions({}, {});
    const m0 = new RankMonitor(0, b0, options);
    const m1 = new RankMonitor(1, b1, options);
    for (const m of [m0, m1]) m.registerGroup('w0.1.0', 'world');
    // A call that did not complete as it returned: running, then (or not yet) ended.
    const begin = (m: RankMonitor, seq: number) => {
      const record = m.begin('world', 0, 2, seq, 'allReduce', 'allReduce(float32[4], sum)', 16, [1]);
      m.running(record, performance.now());
      return record;
    };
    m0.end(begin(m0, 0));
    m1.end(begin(m1, 0));
    const pending = begin(m0, 1);
    m0.waiting(pending, 'group rank 1 (global rank 1)');
    m0.publish();

    const seen = m1.describeRanks({ groupId: 'w0.1.0', groupName: 'world', seq: 1, members: [0, 1] });
    expect(seen).toContain('ranks that have not arrived at call #1 on group "world": 1');
    expect(seen).toMatch(
      /rank 0: 1 call\(s\) pending; last completed allReduce #0 on group "world" .* ago\n\s+allReduce\(float32\[4\], sum\) #1 on group "world" for .*, waiting for group rank 1 \(global rank 1\) \(called at .*debug-status-board\.test\.ts:\d+/,
    );
    expect(seen).toMatch(/rank 1: running its own code \(in no call\); last completed allReduce #0/);

    m0.end(pending, new Error('boom\nsecond line'));
    expect(m1.peerFailure(0, 'w0.1.0', 1)).toEqual({ name: 'Error', message: 'boom' });
    expect(await m1.peerSite(0, 'w0.1.0', 1)).toMatch(/debug-status-board\.test\.ts:\d+/);
    expect(m1.departure(0)).toBeUndefined();
    m0.close();
    expect(m1.departure(0)).toBe('it left its main function');
    expect(describeRanks(b1)).toMatch(/^rank 0: it left its main function; last completed allReduce #1/m);
    // Only the error's first line: the rest (its own hang report, say) is the failed rank's to print.
    m1.close(new RangeError('bad shard\nhang report (rank 1, after waiting 1.0 s):\nrank 0: …'));
    expect(m0.departure(1)).toBe('it failed with RangeError: bad shard');
    expect(describeRanks(b0)).toMatch(/^rank 1: it failed with RangeError: bad shard; last completed/m);
    expect(describeRanks(b0)).not.toContain('hang report');
    if (kind === 'file')
      expect(readdirSync((b0 as FileStatusBoard).dir).sort()).toEqual([
        'status-rank0.json',
        'status-rank1.json',
      ]);
  });

  it('a call that completed as it returned shows as done, never pending, with the times it was given', () => {
    const [b0] = boards(kind);
    const m0 = new RankMonitor(0, b0, resolveDebugOptions({}, {}));
    m0.registerGroup('w0.1.0', 'world');
    const record = m0.begin('world', 0, 2, 3, 'allReduce', 'allReduce(float32[1], sum)', 4, [1]);
    const started = performance.now();
    m0.endAtOnce(record, started, started + 0.25);
    const row = b0.read(0);
    expect(row.pending).toBe(0);
    expect(row.done.seq).toBe(3);
    expect(row.started.seq).toBe(3);
    expect(record.status).toBe('ok');
    expect(record.endUs - record.startUs).toBeCloseTo(250, 3);
    expect(Math.abs(record.startUs / 1000 - Date.now())).toBeLessThan(1000);
    expect(m0.recorder.dump().at(-1)).toMatchObject({ seq: 3, status: 'ok' });
  });
});

describe('file status board', () => {
  it('a rank that has written nothing yet is "not started"; rows of other ranks are read-only', () => {
    const [b0] = boards('file');
    expect(b0.read(1).state).toBe(0);
    expect(describeRanks(b0)).toContain('rank 1: not started');
    expect(() => b0.callStarted(1, 0, 0, 0, Date.now())).toThrow(
      /FileStatusBoard of rank 0: cannot write rank 1's row/,
    );
  });

  it('installProcessMonitor: a process rank monitored over the job directory, its hang reports written there', () => {
    const [b0] = boards('file');
    const dir = (b0 as FileStatusBoard).dir;
    try {
      const monitor = installProcessMonitor(1, 2, dir, { flightRecorderSize: 5 });
      expect(rankMonitor()).toBe(monitor);
      expect(monitor.board).toBeInstanceOf(FileStatusBoard);
      expect(monitor.options).toMatchObject({ checks: true, flightRecorderSize: 5, hangReportDir: dir });
      expect(readdirSync(dir)).toEqual(['status-rank1.json']);
      expect(monitor.saveHangReport('report')).toMatch(/hang-rank1-\d+\.txt$/);
      expect(() => installProcessMonitor(1, 2, dir, { flightRecorderSize: -2 })).toThrow(
        /initProcess: debug: flightRecorderSize must be an integer/,
      );
    } finally {
      setRankMonitor(undefined);
    }
  });
});

describe('thread status board', () => {
  const snapshot = (at: number) => ({ rank: 0, at, groups: [], pending: [], failed: [] });

  /** Runs `during` while rank 0's writer is between its seqlock's two version bumps. */
  function midWrite(board: ThreadStatusBoard, at: number, during: () => void): void {
    const set = Uint8Array.prototype.set;
    Uint8Array.prototype.set = function (this: Uint8Array, ...args: Parameters<typeof set>) {
      Uint8Array.prototype.set = set;
      during();
      set.apply(this, args);
    };
    try {
      board.writeSnapshot(0, snapshot(at));
    } finally {
      Uint8Array.prototype.set = set;
    }
  }

  it('a reader gets the last whole snapshot while the writer is mid-write, or died mid-write', () => {
    const shared = ThreadStatusBoard.createShared(2);
    const writer = new ThreadStatusBoard(shared);
    const reader = new ThreadStatusBoard(shared);
    expect(reader.read(0).snapshot).toBeUndefined();
    writer.writeSnapshot(0, snapshot(1));
    let seen: unknown;
    midWrite(writer, 2, () => {
      seen = new ThreadStatusBoard(shared).read(0).snapshot;
    });
    expect(seen).toEqual(snapshot(1));
    expect(reader.read(0).snapshot).toEqual(snapshot(2));
    // A writer thread terminated between the bumps leaves its slot odd for good.
    expect(() =>
      midWrite(writer, 3, () => {
        throw new Error('terminated');
      }),
    ).toThrow('terminated');
    expect(new ThreadStatusBoard(shared).read(0).snapshot).toEqual(snapshot(2));
  });

  it('a row is decoded once per publication: reads in between get the same snapshot', () => {
    const shared = ThreadStatusBoard.createShared(2);
    const writer = new ThreadStatusBoard(shared);
    const reader = new ThreadStatusBoard(shared);
    writer.writeSnapshot(0, snapshot(1));
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const first = reader.read(0).snapshot;
      expect(reader.read(0).snapshot).toBe(first);
      expect(parse).toHaveBeenCalledTimes(1);
      writer.writeSnapshot(0, snapshot(2));
      expect(reader.read(0).snapshot).toEqual(snapshot(2));
      expect(reader.read(0).snapshot).toEqual(snapshot(2));
      expect(parse).toHaveBeenCalledTimes(2);
    } finally {
      parse.mockRestore();
    }
  });
});

describe('rows of ranks on other nodes', () => {
  it('are shared again on every heartbeat, and count as seen when they last arrived', () => {
    vi.useFakeTimers();
    try {
      const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-status-'));
      dirs.push(dir);
      // Rank 0 on one node, rank 1 on another: rows travel through `share` and `accept`.
      const [near, far] = [
        new FileStatusBoard(dir, 2, 0),
        new FileStatusBoard(mkdtempSync(join(tmpdir(), 'tensorcomm-status-')), 2, 1),
      ];
      dirs.push(far.dir);
      const shared: string[] = [];
      near.share = (row) => {
        shared.push(new TextDecoder().decode(row));
        far.accept(0, row);
      };
      near.setState(0, 1);
      near.startHeartbeat();
      vi.advanceTimersByTime(HEARTBEAT_MS * 4);
      expect(shared.length).toBe(5);
      expect(new Set(shared).size).toBe(1);
      const seen = far.read(0).seen as number;
      expect(seen).toBe(Date.now());
      expect(silentFor(far.read(0), Date.now())).toBeUndefined();
      // A rank that stops (SIGSTOP, a blocked event loop) stops sharing: it turns silent on the other node.
      near.stopHeartbeat();
      vi.advanceTimersByTime(NOT_RESPONDING_MS + HEARTBEAT_MS);
      expect(silentFor(far.read(0), Date.now())).toBe(NOT_RESPONDING_MS + HEARTBEAT_MS);
    } finally {
      vi.useRealTimers();
    }
  });
});
