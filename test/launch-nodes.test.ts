/**
 * `tensorcomm run` as the launchers of a job of several nodes, all on this
 * machine's loopback: every rank's environment, one node's failure stopping
 * every node, a launcher killed outright, a node that never comes, bad flags.
 * The ranks are plain scripts (test/fixtures/launch-nodes.ts): these tests
 * look at the launchers, not at the ranks' stores.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCommand } from '../src/cli/run-command.ts';
import { cleanupStaleJobDirectories, defaultStoreRoot } from '../src/file-store/job-directory.ts';
import '../src/index.ts';
import { alive } from './fixtures/child-run.ts';
import { freePort } from './fixtures/free-port.ts';
import type { Behaviour, EnvLine } from './fixtures/launch-nodes.ts';
import { nodeScript } from './fixtures/node-script.ts';

const root = new URL('..', import.meta.url).pathname;
const fixture = 'test/fixtures/launch-nodes.ts';
const cli = await nodeScript('src/cli/tensorcomm.ts');

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
  /** From the launcher's start, or from `since` when the test set it. */
  ms: number;
}

interface Launcher {
  child: ChildProcess;
  /** Its ranks' pids, as they print them. */
  pids: number[];
  exit: Promise<Exit>;
  /** Measure `exit.ms` from now. */
  since(): void;
}

const launchers: Launcher[] = [];

function launch(flags: string[], behaviour: Behaviour, env: Record<string, string> = {}): Launcher {
  const child = spawn(process.execPath, [...cli, 'run', ...flags, fixture, behaviour], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let started = Date.now();
  let stdout = '';
  let stderr = '';
  const pids: number[] = [];
  child.stdout?.on('data', (chunk) => {
    stdout += chunk;
    pids.splice(0, pids.length, ...[...stdout.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1])));
  });
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const exit = new Promise<Exit>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started })),
  );
  const launcher = { child, pids, exit, since: () => void (started = Date.now()) };
  launchers.push(launcher);
  return launcher;
}

/** The flags of node `node` of a job of `nnodes` × `nproc` ranks. */
const nodeFlags = (port: number, nnodes: number, node: number, nproc: number, ...more: string[]) => [
  '--nnodes',
  `${nnodes}`,
  '--node-rank',
  `${node}`,
  '--nproc-per-node',
  `${nproc}`,
  '--master-port',
  `${port}`,
  ...more,
];

async function until(condition: () => boolean, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Nothing left behind: no rank process, and no job directory of these launchers (a job directory is named after its maker). */
async function expectNothingLeft(of: readonly Launcher[]): Promise<void> {
  const ranks = of.flatMap((l) => l.pids);
  // A rank whose launcher was killed exits on its own, moments later.
  await until(() => ranks.every((pid) => !alive(pid)), `ranks ${ranks.join(', ')} to exit`, 10_000);
  const makers = of.map((l) => `tensorcomm-job-${l.child.pid}-`);
  expect(readdirSync(defaultStoreRoot()).filter((name) => makers.some((m) => name.startsWith(m)))).toEqual(
    [],
  );
}

afterEach(() => {
  for (const { child } of launchers.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

describe('tensorcomm run across nodes', { timeout: 60_000 }, () => {
  it("gives every rank of three nodes torchrun's environment, its node's own directory and node id", async () => {
    const port = await freePort();
    const nodes = [0, 1, 2].map((node) =>
      node === 1
        ? // torchrun's underscore spellings, given to one node
          launch(
            [
              '--nnodes',
              '3',
              '--node_rank',
              '1',
              '--nproc_per_node',
              '2',
              '--master_addr',
              '127.0.0.1',
              `--master_port=${port}`,
            ],
            'exit',
            { TENSORCOMM_NODE_ID: 'inherited' },
          )
        : launch(nodeFlags(port, 3, node, 2), 'exit', { TENSORCOMM_NODE_ID: 'inherited' }),
    );
    const exits = await Promise.all(nodes.map((n) => n.exit));
    for (const [node, { code, stderr }] of exits.entries()) expect(code, `node ${node}: ${stderr}`).toBe(0);

    const jobIds = new Set<string>();
    const dirs = new Set<string>();
    for (const [node, { stdout }] of exits.entries()) {
      const lines = [...stdout.matchAll(/^\[rank (\d+)\] env (.*)$/gm)];
      expect(lines.map((m) => Number(m[1])).sort()).toEqual([2 * node, 2 * node + 1]);
      const nodeDirs = new Set<string>();
      for (const [, prefix, json] of lines) {
        const env = JSON.parse(json) as EnvLine;
        const rank = Number(prefix);
        expect(env).toMatchObject({
          RANK: `${rank}`,
          WORLD_SIZE: '6',
          LOCAL_RANK: `${rank - 2 * node}`,
          LOCAL_WORLD_SIZE: '2',
          GROUP_RANK: `${node}`,
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: `${port}`,
          TENSORCOMM_LAUNCHER: '1',
          storeDirExists: true,
        });
        const [jobId, nodePart] = env.TENSORCOMM_NODE_ID?.split('/') ?? [];
        expect(nodePart).toBe(`node${node}`);
        jobIds.add(jobId);
        // Each launcher makes its node's directory, named after itself and the job.
        expect(env.TENSORCOMM_STORE_DIR).toContain(`tensorcomm-job-${nodes[node].child.pid}-${jobId}`);
        nodeDirs.add(env.TENSORCOMM_STORE_DIR ?? '');
      }
      expect(nodeDirs.size).toBe(1);
      dirs.add([...nodeDirs][0]);
    }
    expect(jobIds.size).toBe(1);
    expect(dirs.size).toBe(3);
    await expectNothingLeft(nodes);
  });

  it("a rank failing on node 1 stops node 0's ranks too; both launchers name it first", async () => {
    const port = await freePort();
    const nodes = [0, 1].map((node) => launch(nodeFlags(port, 2, node, 1, '--grace', '0.5'), 'lastFails'));
    const [zero, one] = await Promise.all(nodes.map((n) => n.exit));
    expect(one.code).toBe(1);
    expect(one.stderr).toMatch(
      /tensorcomm run: 1 rank\(s\) failed: 1\n {2}rank 1 \(rank-1\): Error: rank 1 fails on purpose/,
    );
    expect(zero.code).toBe(1);
    expect(zero.stderr).toMatch(
      /tensorcomm run: 2 rank\(s\) failed: 1, 0\n {2}rank 1 \(rank-1\): Error: rank 1 fails on purpose \(on node 1\)/,
    );
    // Node 0's sleeping rank was stopped by its launcher, not left to sleep out its two minutes.
    expect(zero.stderr).toContain('rank 0 (rank-0): LaunchError: rank 0 (rank-0) was killed by SIGTERM');
    expect(nodes.map((n) => n.pids.length)).toEqual([1, 1]);
    await expectNothingLeft(nodes);
  });

  it('a launcher killed with SIGKILL stops the job on the other node within seconds, naming what was lost', async () => {
    // Two jobs at once: one loses node 1's launcher, the other node 0's, which serves the rendezvous.
    const [portA, portB] = await Promise.all([freePort(), freePort()]);
    const jobs = [portA, portB].map((port) =>
      [0, 1].map((node) => launch(nodeFlags(port, 2, node, 1, '--grace', '0.5'), 'sleep')),
    );
    const all = jobs.flat();
    await until(() => all.every((n) => n.pids.length === 1), 'every rank to start');
    const [lostNode, lostServer] = [jobs[0][1], jobs[1][0]];
    const [survivorA, survivorB] = [jobs[0][0], jobs[1][1]];
    for (const victim of [lostNode, lostServer]) victim.child.kill('SIGKILL');
    for (const survivor of [survivorA, survivorB]) survivor.since();
    const [a, b] = await Promise.all([survivorA.exit, survivorB.exit]);
    expect(a.code).toBe(1);
    expect(a.stderr).toMatch(
      /rank\(s\) failed: 1, 0\n {2}rank 1 \(rank-1\): LaunchError: node 1's launcher was lost/,
    );
    expect(b.code).toBe(1);
    expect(b.stderr).toContain(
      `rank 1 (rank-1): RankFailedError: rank 1: lost the rendezvous at 127.0.0.1:${portB}, which node 0's launcher serves`,
    );
    for (const { ms } of [a, b]) expect(ms).toBeLessThan(15_000);
    // The killed launchers could not remove their directories; the next job on the machine does, as a dead process's.
    cleanupStaleJobDirectories();
    await expectNothingLeft(all);
  });

  it('a node that never comes is a timeout naming it, on every node that came', async () => {
    const [port, unserved] = await Promise.all([freePort(), freePort()]);
    const nodes = [0, 1].map((node) => launch(nodeFlags(port, 3, node, 1, '--join-timeout', '2'), 'exit'));
    // And node 0 itself missing, for a node that came.
    const orphan = launch(nodeFlags(unserved, 2, 1, 1, '--join-timeout', '1'), 'exit');
    const [zero, one, alone] = await Promise.all([...nodes, orphan].map((n) => n.exit));
    for (const { code, stderr } of [zero, one]) {
      expect(code).toBe(1);
      expect(stderr).toContain(`node ranks 2 never joined the rendezvous at 127.0.0.1:${port} within 2 s`);
    }
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain(
      `node rank 0, which serves it, never joined the rendezvous at 127.0.0.1:${unserved} within 1 s`,
    );
    await expectNothingLeft([...nodes, orphan]);
  });

  it('without the secret, a master address that is not loopback fails every node at once, with the same reason', async () => {
    const port = await freePort();
    // 192.0.2.1 is TEST-NET-1: a node that tried to reach node 0 there would wait out its join timeout.
    const flags = (node: number) =>
      nodeFlags(port, 2, node, 1, '--master-addr', '192.0.2.1', '--join-timeout', '30');
    const nodes = [0, 1].map((node) => launch(flags(node), 'exit', { TENSORCOMM_RENDEZVOUS_SECRET: '' }));
    for (const { code, stderr, ms } of await Promise.all(nodes.map((n) => n.exit))) {
      expect(code).toBe(1);
      expect(stderr).toContain(
        'the rendezvous server binds 192.0.2.1, which is not loopback, so it needs a shared secret: set TENSORCOMM_RENDEZVOUS_SECRET to the same secret on every node',
      );
      expect(ms).toBeLessThan(10_000);
    }
    await expectNothingLeft(nodes);
  });
});

describe('tensorcomm run: node flags', () => {
  it.each([
    [['--nnodes', '2', '--nproc', '1'], '--nnodes 2 needs --master-port'],
    [
      ['--nnodes', '2', '--node-rank', '2', '--nproc', '1', '--master-port', '1'],
      '--node-rank 2 is not a node of --nnodes 2 (0..1)',
    ],
    [['--nnodes', '0', '--nproc', '1'], '--nnodes must be an integer in 1..1024, got "0"'],
    [['--node_rank=-1', '--nproc', '1'], '--node-rank must be an integer'],
    [['--nproc', '1', '--nproc-per-node', '1'], '--nproc is an alias of --nproc-per-node: give one of them'],
    [
      ['--nproc_per_node', '2', '--master_port', '70000'],
      '--master-port must be an integer in 1..65535, got "70000"',
    ],
    [['--nproc', '1', '--join-timeout', '0'], '--join-timeout must be a positive number, got "0"'],
    [['--nproc-per-node', '3', '--devices', 'cpu,cpu'], '--devices lists 2 devices for --nproc-per-node 3'],
  ])('%j is a usage error (exit code 2) naming the flag', async (flags, message) => {
    const printed = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await runCommand([...flags, fixture])).toBe(2);
      expect(printed.mock.calls[0][0]).toContain(`tensorcomm run: ${message}`);
    } finally {
      printed.mockRestore();
    }
  });
});
