/**
 * Jobs that span nodes, on one machine as real as it gets: every "node" is a
 * mount namespace with a private /dev/shm, so ranks of different nodes can
 * only meet through the network store (TCP on loopback, or over a veth pair
 * between two network namespaces the test makes and removes). Every layer is
 * checked for exact results across nodes by test/fixtures/many-nodes.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetworkStats } from '../src/index.ts';
import { cleanEnv, runCollecting } from './fixtures/child-run.ts';
import { freePort } from './fixtures/free-port.ts';
import {
  canMakeNodes,
  exitCodes,
  makeNetworkPair,
  type NetworkPair,
  type NodeOptions,
  runOnNode,
} from './fixtures/node-namespace.ts';
import { nodeScript } from './fixtures/node-script.ts';
import { torchrunVars } from './fixtures/torchrun-env.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const RANK_SCRIPT = ['node', ...(await nodeScript('test/fixtures/many-nodes.ts'))];
const CLI = await nodeScript('src/cli/tensorcomm.ts');

/** What rank r of a job of `worldSize` ranks checks (test/fixtures/many-nodes.ts): some layers only on some ranks. */
function layersOf(r: number, worldSize: number): string {
  const last = r === worldSize - 1;
  const layers = [
    'allReduce',
    'allReduce (large)',
    'allReduce (large and small interleaved, 40 rounds)',
    'broadcast',
    'broadcast (large)',
    'allGather',
    'allGather (large)',
    'reduce (large)',
    'reduceScatterTensor',
    'reduceScatterTensor (large)',
    'allToAll',
    'batchIsendIrecv ring',
    ...(last ? ['send/recv'] : []),
    'allGatherObject',
    'broadcastObject',
    ...(r === 0 || last ? ['newGroup across nodes'] : []),
    ...(last ? ['named-worker p2p'] : []),
    'dtensor scatterTensor',
    ...(r === 0 ? ['dtensor gatherTensor'] : []),
    ...(r === 1 || last ? ['TensorFuture handed over'] : []),
    ...(r === 0 ? [] : ['weight sync']),
    'mismatch detected',
  ];
  return `rank ${r} of ${worldSize} passed: ${layers.join(', ')}`;
}

/** `tensorcomm run` as node `node` of `nodes` with `perNode` ranks each (two of two), running the layers' fixture. */
function launcherArgv(node: number, master: readonly string[], nodes = 2, perNode = 2): string[] {
  return [
    'node',
    ...CLI,
    'run',
    '--nnodes',
    String(nodes),
    '--node-rank',
    String(node),
    '--nproc-per-node',
    String(perNode),
    ...master,
    'test/fixtures/many-nodes.ts',
  ];
}

/** A trace's network summary for two nodes of ranks 0, 1 | 2, 3: each rank's bytes to and from the other node's ranks only. */
function expectNetworkOfTwoNodes(network: Record<number, NetworkStats>): void {
  for (const r of [0, 1, 2, 3]) {
    const { peers } = network[r] ?? { peers: {} };
    expect(Object.keys(peers).map(Number), `rank ${r}'s network peers`).toEqual(r < 2 ? [2, 3] : [0, 1]);
    for (const bytes of Object.values(peers)) {
      expect(bytes.sentBytes).toBeGreaterThan(0);
      expect(bytes.receivedBytes).toBeGreaterThan(0);
    }
  }
}

/** Every rank of the job printed its line, with every layer it checks. */
function expectEveryLayer(out: string, ranks: readonly number[], worldSize: number): void {
  const lines = out.split('\n').filter((line) => / passed: /.test(line));
  expect(lines.sort(), out).toEqual(ranks.map((r) => layersOf(r, worldSize)).sort());
}

describe.skipIf(!canMakeNodes)('ranks started by another engine on two nodes', { timeout: 120_000 }, () => {
  it('torchrun-style ranks, two per node, run every layer across the nodes', async () => {
    const runs = await twoNodes(RANK_SCRIPT);
    for (const run of runs) expect(exitCodes(run), run.out).toEqual([0, 0]);
    expectEveryLayer(runs[0].out, [0, 1], 4);
    expectEveryLayer(runs[1].out, [2, 3], 4);
  });

  it("srun-style ranks (Slurm's variables by hand, the node from SLURM_NODEID) run every layer", async () => {
    const runs = await twoNodes(RANK_SCRIPT, slurmEnv);
    for (const run of runs) expect(exitCodes(run), run.out).toEqual([0, 0]);
    expectEveryLayer(runs[0].out, [0, 1], 4);
    expectEveryLayer(runs[1].out, [2, 3], 4);
  });

  it('rank 0 writes one trace for the job, with every rank of both nodes; no part is left behind', async () => {
    // Each node writes its ranks' trace parts to a private tmpfs here, so only rank 0's file can hold them all.
    const traces = mkdtempSync(join(tmpdir(), 'tensorcomm-engine-trace-'));
    const trace = join(traces, 'job.json');
    const runs = await twoNodes(
      RANK_SCRIPT,
      (n, l, p) => ({ ...torchrunEnv(n, l, p), TENSORCOMM_TRACE: trace }),
      {
        privateDirs: [traces],
        after: `echo "trace: $(cat ${trace} 2>/dev/null)"; echo "files: $(ls ${traces})"`,
      },
    ).finally(() => rmSync(traces, { recursive: true, force: true }));
    for (const run of runs) expect(exitCodes(run), run.out).toEqual([0, 0]);
    const traceOf = (out: string) => /^trace: (.*)$/m.exec(out)?.[1] ?? '';
    const { traceEvents, otherData } = JSON.parse(traceOf(runs[0].out)) as {
      traceEvents: Array<{ ph: string; tid: number }>;
      otherData: { network: Record<number, NetworkStats> };
    };
    const ranksTraced = new Set(traceEvents.filter((e) => e.ph === 'X').map((e) => e.tid));
    expect([...ranksTraced].sort()).toEqual([0, 1, 2, 3]);
    expectNetworkOfTwoNodes(otherData.network);
    // Node 0 holds the trace alone; node 1 handed its ranks' parts over and kept nothing.
    expect(/^files: (.*)$/m.exec(runs[0].out)?.[1], runs[0].out).toBe('job.json');
    expect(/^files: (.*)$/m.exec(runs[1].out)?.[1], runs[1].out).toBe('');
  });

  it('a hang report describes the ranks of the other node too, as they shared their rows', async () => {
    const reports = mkdtempSync(join(tmpdir(), 'tensorcomm-many-nodes-'));
    try {
      const runs = await twoNodes(
        ['node', ...(await nodeScript('test/fixtures/many-nodes-hang.ts'))],
        (n, l, p) => ({
          ...torchrunEnv(n, l, p),
          TENSORCOMM_HANG_REPORT_DIR: reports,
        }),
      );
      for (const run of runs) expect(exitCodes(run), run.out).toEqual([0, 0]);
      const out = runs[0].out;
      expect(out).toMatch(/ranks that have not arrived at call #0 on group "short": 3\n/);
      // Rank 2 and 3 are on the other node: without their shared rows they would read as not started.
      expect(out).toMatch(
        /\nrank 2: 1 call\(s\) pending;[^\n]*\n\s+allReduce\(int32\[1\], sum\) #0 on group "short"/,
      );
      expect(out).toMatch(/\nrank 3: running its own code \(in no call\)/);
    } finally {
      rmSync(reports, { recursive: true, force: true });
    }
  });

  it('a rank killed mid-job fails every other rank within seconds, naming it, on both nodes', async () => {
    const runs = await twoNodes(['node', ...(await nodeScript('test/fixtures/many-nodes-lost.ts'))]);
    const out = runs.map((r) => r.out).join('\n');
    for (const r of [0, 1, 2]) {
      const line = new RegExp(`^rank ${r} failed after ([\\d.]+) s: RankFailedError: .*rank 3\\b`, 'm').exec(
        out,
      );
      expect(line, out).not.toBeNull();
      // The collective timeout is 30 s: the loss was noticed, not waited out.
      expect(Number(line![1])).toBeLessThan(10);
    }
  });

  it("group.nodeOf gives the job's node indexes; networkStats counts alike at both ends, a send as its payload plus headers", async () => {
    const runs = await twoNodes(['node', ...(await nodeScript('test/fixtures/node-stats.ts'))]);
    for (const run of runs) expect(exitCodes(run), run.out).toEqual([0, 0]);
    const out = runs.map((r) => r.out).join('\n');
    const passed = out.split('\n').filter((line) => / node stats passed /.test(line));
    expect(passed.map((line) => line.split(' node stats')[0]).sort(), out).toEqual([
      'rank 0',
      'rank 1',
      'rank 2',
      'rank 3',
    ]);
  });
});

type EngineEnv = (node: number, local: number, port: string) => Record<string, string>;

/** torchrun's variables, with the node named by TENSORCOMM_NODE_ID. */
const torchrunEnv: EngineEnv = (node, local, port) =>
  torchrunVars(
    [
      [0, 1],
      [2, 3],
    ],
    node,
    local,
    port,
  );

/** What srun sets on two nodes of two tasks; the master is the job's first host. */
const slurmEnv: EngineEnv = (node, local, port) => ({
  SLURM_PROCID: String(2 * node + local),
  SLURM_NTASKS: '4',
  SLURM_LOCALID: String(local),
  SLURM_NODEID: String(node),
  SLURM_NTASKS_PER_NODE: '2',
  SLURM_JOB_NODELIST: 'localhost,127.0.0.1',
  MASTER_PORT: port,
  // The user's secret: the network store authenticates with it, and it never travels.
  TENSORCOMM_RENDEZVOUS_SECRET: 'a-secret-every-node-was-given',
});

/** Two nodes of two ranks each, every node in its own mount namespace, running `argv` with an engine's variables. */
async function twoNodes(argv: string[], engineEnv: EngineEnv = torchrunEnv, options: NodeOptions = {}) {
  const port = String(await freePort());
  const nodes = [0, 1].map((node) =>
    runOnNode(
      [0, 1].map((local) => ({ argv, env: engineEnv(node, local, port) })),
      ROOT,
      options,
    ),
  );
  return Promise.all(nodes);
}

const hasMpirun = spawnSync('mpirun', ['--version'], { stdio: 'ignore' }).status === 0;

describe.skipIf(!hasMpirun)('ranks started by mpirun', { timeout: 120_000 }, () => {
  it('two "nodes" of two ranks (TENSORCOMM_NODE_ID from OMPI_COMM_WORLD_RANK) run every layer', async () => {
    const port = String(await freePort());
    const rankCommand = `TENSORCOMM_NODE_ID=mpi-node-$((OMPI_COMM_WORLD_RANK / 2)) exec ${RANK_SCRIPT.join(' ')}`;
    const { code, out } = await runCollecting(
      'mpirun',
      [
        '--allow-run-as-root',
        '--oversubscribe',
        '-np',
        '4',
        '-x',
        `MASTER_PORT=${port}`,
        'sh',
        '-c',
        rankCommand,
      ],
      { cwd: ROOT, env: cleanEnv() },
    );
    expect(code, out).toBe(0);
    expectEveryLayer(out, [0, 1, 2, 3], 4);
  });
});

describe.skipIf(!canMakeNodes)('two tensorcomm run launchers as two nodes', { timeout: 120_000 }, () => {
  it('every layer across the nodes, the output prefixed with global ranks, one trace for the job', async () => {
    const port = String(await freePort());
    // Each node writes its ranks' trace parts to a private tmpfs here, so only node 0's file can hold them all.
    const traces = mkdtempSync(join(tmpdir(), 'tensorcomm-many-nodes-trace-'));
    const trace = join(traces, 'job.json');
    const launcher = (node: number) => ({
      env: { TENSORCOMM_TRACE: trace },
      argv: launcherArgv(node, ['--master-port', port]),
    });
    const runs = await Promise.all(
      [0, 1].map((node) =>
        runOnNode([launcher(node)], ROOT, {
          privateDirs: [traces],
          after: `echo "trace: $(cat ${trace} 2>/dev/null)"`,
        }),
      ),
    ).finally(() => rmSync(traces, { recursive: true, force: true }));
    const traceOf = (out: string) => /^trace: (.*)$/m.exec(out)?.[1] ?? '';
    // Node 0 wrote the job's trace, with every rank's calls; node 1 handed its part over and kept none.
    const { traceEvents, otherData } = JSON.parse(traceOf(runs[0].out)) as {
      traceEvents: Array<{ ph: string; tid: number }>;
      otherData: { network: Record<number, NetworkStats> };
    };
    const ranksTraced = new Set(traceEvents.filter((e) => e.ph === 'X').map((e) => e.tid));
    expect([...ranksTraced].sort()).toEqual([0, 1, 2, 3]);
    expectNetworkOfTwoNodes(otherData.network);
    expect(traceOf(runs[1].out)).toBe('');
    for (const [node, run] of runs.entries()) {
      expect(exitCodes(run), run.out).toEqual([0]);
      const ranks = [2 * node, 2 * node + 1];
      // `[rank N] rank N of 4 passed: …`, by the launcher's prefix with the global rank.
      const prefixed = run.out.split('\n').filter((line) => / passed: /.test(line));
      expect(prefixed.sort(), run.out).toEqual(ranks.map((r) => `[rank ${r}] ${layersOf(r, 4)}`).sort());
    }
  });
});

describe.skipIf(!canMakeNodes)(
  'three tensorcomm run launchers of one rank each',
  { timeout: 120_000 },
  () => {
    it('every layer with every value crossing the network (one rank per node: no shared memory at all)', async () => {
      const port = String(await freePort());
      const runs = await Promise.all(
        [0, 1, 2].map((node) =>
          runOnNode([{ argv: launcherArgv(node, ['--master-port', port], 3, 1) }], ROOT),
        ),
      );
      for (const [node, run] of runs.entries()) {
        expect(exitCodes(run), run.out).toEqual([0]);
        expectEveryLayer(run.out.replace(/^\[rank \d+\] /gm, ''), [node], 3);
      }
    });
  },
);

describe.skipIf(!canMakeNodes)('two nodes with network stacks of their own', { timeout: 120_000 }, () => {
  let pair: NetworkPair | undefined;
  beforeAll(() => {
    pair = makeNetworkPair(0);
  });
  afterAll(() => pair?.remove());

  it('every layer across a veth pair, with the job secret; node 0 listens where TENSORCOMM_SOCKET_IFNAME says, node 1 where it reaches the master', async (ctx) => {
    if (!pair) {
      console.warn('skipped: this machine cannot make network namespaces (needs root and ip netns)');
      return ctx.skip();
    }
    const { names, addresses, interfaces } = pair;
    // A master address that is not loopback needs the job's secret on every node.
    const secret = { TENSORCOMM_RENDEZVOUS_SECRET: 'a-secret-both-nodes-were-given-0123456789' };
    const launcher = (node: number) => ({
      env: node === 0 ? { ...secret, TENSORCOMM_SOCKET_IFNAME: interfaces[0] } : secret,
      argv: launcherArgv(node, ['--master-addr', addresses[0], '--master-port', '29400']),
    });
    const runs = await Promise.all(
      [0, 1].map((node) => runOnNode([launcher(node)], ROOT, { netns: names[node] })),
    );
    for (const [node, run] of runs.entries()) {
      expect(exitCodes(run), run.out).toEqual([0]);
      expectEveryLayer(run.out.replace(/^\[rank \d+\] /gm, ''), [2 * node, 2 * node + 1], 4);
    }
  });
});
