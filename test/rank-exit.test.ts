/**
 * Prompt failure detection for process ranks: a rank that exits with code 0
 * in the middle of the job fails its peer within a second or two, under the
 * launcher and without one (the collective timeout is two minutes, so only
 * detection passes these tests), and a stopped rank shows in the hang report
 * as not responding, with the time since it was last seen.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { FileStatusBoard, statusFilePath } from '../src/debug/file-status-board.ts';
import { describeRanks } from '../src/debug/hang-report.ts';
import { RankMonitor } from '../src/debug/monitor.ts';
import { resolveDebugOptions } from '../src/debug/options.ts';
import { JobFailedError, launchProcesses } from '../src/index.ts';
import { alive, type StartedChild, startCollecting } from './fixtures/child-run.ts';
import { freePort } from './fixtures/free-port.ts';
import { nodeScript } from './fixtures/node-script.ts';
import type { scenarios } from './fixtures/rank-exit.ts';
import type { Outcome } from './fixtures/scenarios.ts';
import '../src/thread-group/ops.ts';
import { jobDirectoriesOf } from './fixtures/job-directories.ts';

const root = new URL('..', import.meta.url).pathname;
const fixture = 'test/fixtures/rank-exit.ts';
const [fixtureRun, cli] = await Promise.all([nodeScript(fixture), nodeScript('src/cli/tensorcomm.ts')]);
/** Far above any detection time, far below the two-minute collective timeout. */
const DETECTED_WITHIN_MS = 10_000;

function outcomeIn(text: string): Outcome {
  const match = /outcome=(\{.*\})/.exec(text);
  if (!match) throw new Error(`no outcome line in:\n${text}`);
  return JSON.parse(match[1]) as Outcome;
}

function pidsIn(text: string): number[] {
  return [...text.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
}

/**
 * Ends what a test left running, stopped processes included (SIGKILL needs no SIGCONT, but a resumed one
 * exits cleaner). Only pids still the test's own: a reaped process's pid is soon another's (pids wrap at
 * 32768 here, and every thread takes one), and killing it once killed another test file's child.
 */
function endAll(pids: readonly number[]): void {
  // kill(-1) or kill(0) would signal far more than the test's own processes.
  for (const pid of pids.filter((p) => p > 0)) {
    for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
      try {
        process.kill(pid, signal);
      } catch {}
    }
  }
}

/** The environment of process `pid` as NAME=value entries; none once it is gone (or a zombie). */
function environmentOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
  } catch {
    return [];
  }
}

const scenario = (name: keyof typeof scenarios) => name;

/** torchrun's variables for rank `rank` of two, rank 0 serving the rendezvous on `port`. */
function engineEnv(rank: number, port: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    RANK: `${rank}`,
    WORLD_SIZE: '2',
    MASTER_ADDR: '127.0.0.1',
    MASTER_PORT: `${port}`,
  };
}

/** A rank of the fixture started as torchrun would start it. */
function startByEngine(rank: number, port: number, name: keyof typeof scenarios): StartedChild {
  const child = startCollecting(process.execPath, [...fixtureRun, scenario(name)], {
    cwd: root,
    env: engineEnv(rank, port),
  });
  if (child.pid < 0) throw new Error(`rank ${rank}: the fixture did not start`);
  return child;
}

/** `tensorcomm run --nproc 2` of the fixture; its exit code (0 when it succeeded) and output. */
async function runUnderLauncher(name: keyof typeof scenarios) {
  const args = [...cli, 'run', '--nproc', '2'];
  return (await promisify(execFile)(
    process.execPath,
    [...args, '--collective-timeout', '120', fixture, scenario(name)],
    { cwd: root, timeout: 60_000 },
  ).then(
    (ended) => ({ code: 0, ...ended }),
    (e: unknown) => e,
  )) as { code: number; stdout: string; stderr: string };
}

describe('a process rank that exits with code 0 mid-job', { timeout: 90_000 }, () => {
  it('fails its peer within seconds under tensorcomm run, which exits 1 naming it', async () => {
    const started = performance.now();
    const failed = await runUnderLauncher('exitZero');
    const elapsed = performance.now() - started;
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toMatch(/tensorcomm run: \d rank\(s\) failed: 1/);
    expect(failed.stderr).toMatch(
      /rank 1 \(rank-1\) exited with code 0 before its main finished \(its context was still open.*, in recv\(/,
    );
    const seen = outcomeIn(failed.stdout);
    expect(seen.ok).toBe(false);
    if (seen.ok) return;
    expect(seen.message).toMatch(/rank 1\b.*exited with code 0 before its main finished/);
    expect(seen.ms).toBeLessThan(DETECTED_WITHIN_MS);
    console.log(
      `under the launcher: rank 0 failed ${seen.ms.toFixed(0)} ms into its allReduce (rank 1 left at ~300 ms); job ${elapsed.toFixed(0)} ms`,
    );
    for (const pid of pidsIn(failed.stdout)) expect(alive(pid), `process ${pid}`).toBe(false);
  });

  it('does not fail the job when it had finished its calls (closed or not), under tensorcomm run', async () => {
    const ended = await runUnderLauncher('exitAtEnd');
    expect(ended.code, ended.stderr).toBe(0);
    expect(ended.stderr).not.toMatch(/failed/);
  });

  it('fails its peer within seconds when an engine started the ranks, and leaves no job directory', async () => {
    const port = await freePort();
    const ranks = [0, 1].map((rank) => startByEngine(rank, port, 'exitZero'));
    try {
      const [first, leaver] = await Promise.all(ranks.map((r) => r.ended));
      expect(leaver.code).toBe(0);
      // Rank 0 caught its failure and closed its context: it ends cleanly, without waiting for rank 1 at the end.
      expect(first.code, first.out).toBe(0);
      const seen = outcomeIn(first.out);
      expect(seen.ok).toBe(false);
      if (seen.ok) return;
      expect(seen.message).toMatch(/rank 1\b.*exited with code 0 before its main finished/);
      expect(seen.ms).toBeLessThan(DETECTED_WITHIN_MS);
      console.log(
        `without a launcher: rank 0 failed ${seen.ms.toFixed(0)} ms into its allReduce (rank 1 left at ~300 ms)`,
      );
      expect(jobDirectoriesOf(ranks.map((r) => r.pid))).toEqual([]);
    } finally {
      for (const r of ranks) r.kill();
    }
  });
});

/**
 * A parent that reaps its child only when its stdin closes, as an engine's agent
 * that polls its workers now and then does: until then the dead child is a zombie,
 * which still answers kill(pid, 0).
 */
const LAZY_PARENT = [
  'import subprocess, sys',
  'child = subprocess.Popen(sys.argv[1:])',
  'sys.stdin.read()',
  'child.wait()',
].join('\n');
const hasPython = spawnSync('python3', ['-c', ''], { stdio: 'ignore' }).status === 0;

describe.skipIf(!hasPython)(
  'a process rank killed under a parent that has not reaped it',
  { timeout: 90_000 },
  () => {
    it('is seen gone by its peers within seconds, though its pid still answers', async () => {
      const port = await freePort();
      const first = startByEngine(0, port, 'killed');
      const parent = spawn('python3', ['-c', LAZY_PARENT, process.execPath, ...fixtureRun, 'killed'], {
        cwd: root,
        env: engineEnv(1, port),
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      let parentOutput = '';
      parent.stdout.on('data', (chunk) => {
        parentOutput += chunk;
      });
      const parentClosed = new Promise<void>((resolve) => parent.on('close', () => resolve()));
      try {
        const { code, out: output } = await first.ended;
        const [victim] = pidsIn(parentOutput);
        expect(victim, parentOutput).toBeDefined();
        // Still a zombie: only /proc says it is dead.
        expect(alive(victim)).toBe(true);
        expect(code, output).toBe(0);
        const seen = outcomeIn(output);
        expect(seen.ok).toBe(false);
        if (seen.ok) return;
        expect(seen.message).toContain(
          `rank 1 (rank-1, pid ${victim}) exited before the job ended, recording no exit: killed by a signal, or crashed`,
        );
        expect(seen.ms).toBeLessThan(DETECTED_WITHIN_MS);
        expect(jobDirectoriesOf([first.pid])).toEqual([]);
      } finally {
        first.kill();
        // Unreaped, the victim's pid is still its own: nothing else can hold it yet.
        endAll(pidsIn(parentOutput));
        parent.stdin.end();
        await Promise.race([parentClosed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
        parent.kill('SIGKILL');
      }
    });
  },
);

describe('a stopped process rank', { timeout: 90_000 }, () => {
  it('shows in the hang report as not responding, with the time since it was last seen', async () => {
    const output: string[] = [];
    // Rank 0's timeout writes a hang report: into a directory this test removes.
    const reports = mkdtempSync(join(tmpdir(), 'tensorcomm-rank-exit-'));
    try {
      const error = await launchProcesses(new URL(`../${fixture}`, import.meta.url), {
        nproc: 2,
        args: { scenario: scenario('stopped') },
        collectiveTimeoutMs: 6_000,
        graceMs: 1_000,
        env: { TENSORCOMM_HANG_REPORT_DIR: reports },
        output: (_rank, line) => output.push(line),
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobFailedError);
      const { failures } = error as JobFailedError;
      expect(failures[0].rank).toBe(0);
      const report = failures[0].error.message;
      expect(report).toMatch(
        /rank 1: not responding, last seen \d+(\.\d+)? s ago \(stopped, or its event loop is blocked\)/,
      );
      // What it was doing when it stopped answering is still shown, as last seen.
      expect(report).toMatch(/rank 1: not responding.*; as last seen: 1 call\(s\) pending/);
      // The launcher's SIGKILL ended the stopped rank.
      for (const pid of pidsIn(output.join('\n'))) expect(alive(pid), `process ${pid}`).toBe(false);
      expect(readdirSync(reports)).toHaveLength(1);
    } finally {
      // The launcher reaped its ranks: a pid is still theirs only while it carries this job's environment.
      const marker = `TENSORCOMM_HANG_REPORT_DIR=${reports}`;
      endAll(pidsIn(output.join('\n')).filter((pid) => environmentOf(pid).includes(marker)));
      rmSync(reports, { recursive: true, force: true });
    }
  });

  it('a file row untouched for longer than a few heartbeats reads as not responding; a fresh one does not', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-liveness-'));
    try {
      const options = resolveDebugOptions({}, {});
      const peer = new RankMonitor(1, new FileStatusBoard(dir, 2, 1), options);
      peer.registerGroup('w', 'world');
      const board = new FileStatusBoard(dir, 2, 0);
      new RankMonitor(0, board, options);
      expect(describeRanks(board)).not.toContain('not responding');
      const tenSecondsAgo = new Date(Date.now() - 10_000);
      utimesSync(statusFilePath(dir, 1), tenSecondsAgo, tenSecondsAgo);
      expect(describeRanks(board)).toMatch(/rank 1: not responding, last seen 10\.\d\d s ago/);
      expect(describeRanks(board)).not.toMatch(/rank 0: not responding/);
      // A process's performance clock drifts from the wall clock a file's time is on: the age is the wall clock's.
      const now = performance.now.bind(performance);
      vi.spyOn(performance, 'now').mockImplementation(() => now() - 500);
      expect(describeRanks(board)).toMatch(/rank 1: not responding, last seen 10\.\d\d s ago/);
    } finally {
      vi.restoreAllMocks();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
