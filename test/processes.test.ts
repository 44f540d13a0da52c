import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { JobFailedError, launchProcesses, RankFailedError } from '../src/index.ts';
import { alive } from './fixtures/child-run.ts';
import { conformanceSuite } from './fixtures/conformance-suite.ts';
import { freePort } from './fixtures/free-port.ts';
import { jobDirectoriesOf } from './fixtures/job-directories.ts';
import { nodeScript } from './fixtures/node-script.ts';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);
const quiet = () => {};
const [cliStart, scriptRun] = await Promise.all([
  nodeScript('src/cli/tensorcomm.ts'),
  nodeScript('test/fixtures/process-script.ts'),
]);

conformanceSuite(
  'collectives in processes',
  (entry, nproc, args) => launchProcesses(entry, { nproc, args, collectiveTimeoutMs: 60_000, output: quiet }),
  [2, 3, 4],
);

describe('launchProcesses', { timeout: 120_000 }, () => {
  it('a rank killed with SIGKILL mid-collective fails the job fast, naming it, and leaves nothing behind', async () => {
    const before = jobDirectoriesOf([process.pid]);
    const pids: number[] = [];
    const output = (_rank: number, line: string) => {
      const match = /^pid=(\d+)$/.exec(line);
      if (match) pids.push(Number(match[1]));
    };
    const started = Date.now();
    const error = await launchProcesses(fixture('process-kill-rank.ts'), {
      nproc: 3,
      args: { victim: 1 },
      collectiveTimeoutMs: 60_000,
      graceMs: 5_000,
      output,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures, message } = error as JobFailedError;
    expect(failures[0].rank).toBe(1);
    expect(failures[0].error.message).toMatch(/rank 1 \(rank-1\) was killed by SIGKILL/);
    expect(message).toMatch(/^3 rank\(s\) failed: 1, /);
    // The survivors were woken by the abort, well before the collective timeout, naming the dead rank.
    for (const { rank, error: e } of failures.slice(1)) {
      expect(e.name, `rank ${rank}`).toBe(RankFailedError.name);
      expect(e.message).toContain('rank 1 (rank-1)');
    }
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(pids).toHaveLength(3);
    for (const pid of pids) expect(alive(pid), `process ${pid}`).toBe(false);
    // The launcher (this process) made the job's directory; its ranks could have made their own.
    expect(jobDirectoriesOf([process.pid, ...pids])).toEqual(before);
  });

  it('rejects naming the rank whose main threw, with its error', async () => {
    const error = await launchProcesses(fixture('failing-rank.ts'), {
      nproc: 2,
      args: { failRank: 1, how: 'throw' },
      collectiveTimeoutMs: 60_000,
      output: quiet,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures } = error as JobFailedError;
    expect(failures[0].rank).toBe(1);
    expect(failures[0].error.message).toMatch(/boom from rank 1/);
  });

  it('a job past its timeout is stopped, naming the ranks still running', async () => {
    const error = await launchProcesses(fixture('failing-rank.ts'), {
      nproc: 2,
      args: { failRank: 1, how: 'hang' },
      timeoutMs: 2_000,
      graceMs: 500,
      output: quiet,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFailedError);
    const { failures } = error as JobFailedError;
    expect(failures.map((f) => f.rank).sort()).toEqual([0, 1]);
    for (const { rank, error: e } of failures) {
      expect(e.message).toBe(`rank ${rank}: job timed out after 2000 ms; ranks still running: 0, 1`);
    }
  });

  it('keeps two jobs on one machine apart', async () => {
    const job = (salt: number) =>
      launchProcesses<number[]>(fixture('process-salt-rank.ts'), {
        nproc: 2,
        args: { salt, rounds: 20 },
        output: quiet,
      });
    const [a, b] = await Promise.all([job(1), job(1000)]);
    const expected = (salt: number) => Array.from({ length: 20 }, (_, i) => 2 * (salt + i));
    expect(a).toEqual([expected(1), expected(1)]);
    expect(b).toEqual([expected(1000), expected(1000)]);
  });

  it('refuses bad options with a message naming them', async () => {
    await expect(launchProcesses(fixture('process-salt-rank.ts'), { nproc: 0 })).rejects.toThrow(
      /launchProcesses: worldSize must be an integer/,
    );
    await expect(launchProcesses('no/such/script.js', { nproc: 2 })).rejects.toThrow(/does not exist/);
  });
});

describe('tensorcomm run', { timeout: 120_000 }, () => {
  const cli = [...cliStart, 'run'];
  const script = 'test/fixtures/process-script.ts';

  it('runs a plain script as N processes and prefixes their output with the rank', async () => {
    const { stdout } = await run(process.execPath, [...cli, '--nproc', '3', script, 'hello'], {
      cwd: root,
      timeout: 60_000,
    });
    for (let r = 0; r < 3; r++)
      expect(stdout).toContain(`[rank ${r}] rank-${r} of 3: sum=6 arg=hello device=cpu`);
  });

  it('exits non-zero naming the failed rank', async () => {
    const error = (await run(process.execPath, [...cli, '--nproc', '2', '--grace', '1', script, 'fail'], {
      cwd: root,
      timeout: 60_000,
    }).catch((e: unknown) => e)) as { code: number; stderr: string };
    expect(error.code).toBe(1);
    expect(error.stderr).toMatch(/tensorcomm run: \d rank\(s\) failed: 1/);
    expect(error.stderr).toContain('rank 1 fails on purpose');
  });

  it('answers a usage error with exit code 2 and the usage', async () => {
    const error = (await run(process.execPath, [...cli, script], { cwd: root }).catch((e: unknown) => e)) as {
      code: number;
      stderr: string;
    };
    expect(error.code).toBe(2);
    expect(error.stderr).toContain('--nproc is required');
  });

  it.each([
    [['--devices', 'cuda:0,cuda:1'], '--devices lists 2 devices for --nproc 3'],
    [['--devices', 'gpu0'], `--devices: invalid device "gpu0"; expected 'cpu' or 'cuda:<index>'`],
  ])('refuses bad --devices %j with exit code 2', async (flags, message) => {
    const error = (await run(process.execPath, [...cli, '--nproc', '3', ...flags, script], {
      cwd: root,
    }).catch((e: unknown) => e)) as { code: number; stderr: string };
    expect(error.code).toBe(2);
    expect(error.stderr).toContain(message);
  });
});

describe('initProcess without a launcher', { timeout: 120_000 }, () => {
  it('rank 0 serves the rendezvous when processes are started by hand with torchrun variables', async () => {
    const port = await freePort();
    const before = jobDirectoriesOf([process.pid]);
    const pids: number[] = [];
    const ranks = [0, 1].map((rank) => {
      const child = spawn(process.execPath, [...scriptRun, 'manual'], {
        cwd: root,
        env: {
          ...process.env,
          RANK: String(rank),
          WORLD_SIZE: '2',
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: `${port}`,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      if (child.pid !== undefined) pids.push(child.pid);
      let stdout = '';
      child.stdout.on('data', (chunk) => {
        stdout += chunk;
      });
      return new Promise<{ code: number | null; stdout: string }>((resolve) =>
        child.on('close', (code) => resolve({ code, stdout })),
      );
    });
    const results = await Promise.all(ranks);
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    expect(results[1].stdout).toContain('rank-1 of 2: sum=3 arg=manual');
    // Rank 0 made the job's directory.
    expect(pids).toHaveLength(2);
    expect(jobDirectoriesOf([process.pid, ...pids])).toEqual(before);
  });
});
