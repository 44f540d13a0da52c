/**
 * Ranks that another engine started: the environment of torchrun, Open MPI's
 * mpirun and Slurm's srun, read as each sets it, and processes started by
 * hand with each engine's variables joining one job.
 */
import { describe, expect, it } from 'vitest';
import { readProcessEnv } from '../src/launch/process-env.ts';
import { expandSlurmHosts } from '../src/launch/slurm-hosts.ts';
import { type ChildRun, cleanEnv, runCollecting } from './fixtures/child-run.ts';
import { freePort } from './fixtures/free-port.ts';
import { jobDirectoriesOf } from './fixtures/job-directories.ts';
import { nodeScript } from './fixtures/node-script.ts';

const HOST = 'this-host';

describe('expandSlurmHosts', () => {
  it('expands ranges with their padding, lists and several bracket groups', () => {
    expect(expandSlurmHosts('gpu[01-04,07],cpu3')).toEqual([
      'gpu01',
      'gpu02',
      'gpu03',
      'gpu04',
      'gpu07',
      'cpu3',
    ]);
    expect(expandSlurmHosts('node7')).toEqual(['node7']);
    expect(expandSlurmHosts('r[1-2]-n[08-10]')).toEqual([
      'r1-n08',
      'r1-n09',
      'r1-n10',
      'r2-n08',
      'r2-n09',
      'r2-n10',
    ]);
    expect(expandSlurmHosts('a[9-11],b')).toEqual(['a9', 'a10', 'a11', 'b']);
  });

  it('refuses malformed and oversized lists, naming the variable', () => {
    expect(() => expandSlurmHosts('gpu[01-04')).toThrow(
      /SLURM_JOB_NODELIST="gpu\[01-04": an opening bracket/,
    );
    expect(() => expandSlurmHosts('gpu[4-1]')).toThrow(SyntaxError);
    expect(() => expandSlurmHosts('gpu[x]')).toThrow(/"x" is not a number/);
    expect(() => expandSlurmHosts('a,,b')).toThrow(/empty host name/);
    expect(() => expandSlurmHosts('gpu[[1]]')).toThrow(/unbalanced/);
    expect(() => expandSlurmHosts('n[0-99999999]')).toThrow(RangeError);
    expect(() => expandSlurmHosts('a[0-999]b[0-999]')).toThrow(RangeError);
  });
});

describe('readProcessEnv', () => {
  it("reads torchrun's variables", () => {
    const env = readProcessEnv(
      {
        RANK: '3',
        WORLD_SIZE: '8',
        LOCAL_RANK: '1',
        LOCAL_WORLD_SIZE: '2',
        MASTER_ADDR: 'h0',
        MASTER_PORT: '1234',
      },
      HOST,
    );
    expect(env).toEqual({
      engine: 'torchrun',
      rank: 3,
      worldSize: 8,
      localRank: 1,
      localWorldSize: 2,
      nodeId: HOST,
      masterAddr: 'h0',
      masterPort: 1234,
      launched: false,
    });
  });

  it("reads Open MPI's, with torchrun's defaults for the master", () => {
    const env = readProcessEnv(
      {
        OMPI_COMM_WORLD_RANK: '2',
        OMPI_COMM_WORLD_SIZE: '4',
        OMPI_COMM_WORLD_LOCAL_RANK: '0',
        OMPI_COMM_WORLD_LOCAL_SIZE: '2',
      },
      HOST,
    );
    expect(env).toMatchObject({
      engine: 'openmpi',
      rank: 2,
      worldSize: 4,
      localRank: 0,
      localWorldSize: 2,
      masterAddr: '127.0.0.1',
      masterPort: 29500,
    });
    expect(
      readProcessEnv({ OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '1', MASTER_PORT: '4000' }, HOST)
        .masterPort,
    ).toBe(4000);
  });

  it("reads Slurm's: the master is the job's first host, the node its SLURM_NODEID", () => {
    const env = readProcessEnv(
      {
        SLURM_PROCID: '5',
        SLURM_NTASKS: '8',
        SLURM_LOCALID: '1',
        SLURM_NODEID: '2',
        SLURM_NTASKS_PER_NODE: '2',
        SLURM_JOB_NODELIST: 'gpu[03-06]',
      },
      HOST,
    );
    expect(env).toMatchObject({
      engine: 'slurm',
      rank: 5,
      worldSize: 8,
      localRank: 1,
      localWorldSize: 2,
      nodeId: '2',
      masterAddr: 'gpu03',
      masterPort: 29500,
    });
    // A heterogeneous count such as "2(x3)" is no single local size.
    const mixed = { SLURM_PROCID: '0', SLURM_NTASKS: '6', SLURM_NTASKS_PER_NODE: '2(x3)', MASTER_ADDR: 'm' };
    expect(readProcessEnv(mixed, HOST)).toMatchObject({ localWorldSize: 6, masterAddr: 'm' });
  });

  it('takes the node id from TENSORCOMM_NODE_ID, then SLURM_NODEID, then the host name', () => {
    const torchrun = { RANK: '0', WORLD_SIZE: '1', MASTER_PORT: '1' };
    expect(readProcessEnv(torchrun, HOST).nodeId).toBe(HOST);
    expect(readProcessEnv({ ...torchrun, SLURM_NODEID: '4' }, HOST).nodeId).toBe('4');
    expect(readProcessEnv({ ...torchrun, SLURM_NODEID: '4', TENSORCOMM_NODE_ID: 'n' }, HOST).nodeId).toBe(
      'n',
    );
  });

  it("marks tensorcomm's own launcher", () => {
    const env = readProcessEnv(
      { RANK: '0', WORLD_SIZE: '1', MASTER_PORT: '9', TENSORCOMM_LAUNCHER: '1' },
      HOST,
    );
    expect(env).toMatchObject({ engine: 'tensorcomm', launched: true });
  });

  it('names what is missing or out of range, and how to start a script', () => {
    expect(() => readProcessEnv({}, HOST)).toThrow(
      /WORLD_SIZE is not set; start the script with 'tensorcomm run', torchrun, mpirun or srun/,
    );
    expect(() => readProcessEnv({ RANK: '0', WORLD_SIZE: '2' }, HOST)).toThrow(/MASTER_PORT is not set/);
    expect(() => readProcessEnv({ OMPI_COMM_WORLD_RANK: '0' }, HOST)).toThrow(
      /OMPI_COMM_WORLD_SIZE is not set/,
    );
    expect(() => readProcessEnv({ SLURM_PROCID: '4', SLURM_NTASKS: '4' }, HOST)).toThrow(
      /SLURM_PROCID="4" must be an integer in 0\.\.3/,
    );
    expect(() =>
      readProcessEnv({ SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_JOB_NODELIST: 'g[1-' }, HOST),
    ).toThrow(/SLURM_JOB_NODELIST/);
    expect(() => readProcessEnv({ RANK: '0', WORLD_SIZE: '2', MASTER_PORT: '70000' }, HOST)).toThrow(
      RangeError,
    );
  });
});

const rankScript = await nodeScript('test/fixtures/engine-env.ts');
const timedRank = await nodeScript('test/fixtures/timed-rank.ts');

/** Starts one process per environment, as the engine would, and waits for all of them. */
function startRanks(envs: Record<string, string>[], script = rankScript): Promise<ChildRun[]> {
  return Promise.all(
    envs.map((vars) =>
      // Only the engine's own variables: none of the test runner's RANK/WORLD_SIZE may leak in.
      runCollecting(process.execPath, script, {
        cwd: new URL('..', import.meta.url).pathname,
        env: { ...cleanEnv(), ...vars },
      }),
    ),
  );
}

describe('processes started by another engine', { timeout: 120_000 }, () => {
  it('mpirun-style and srun-style ranks join one job; rank 0 serves the rendezvous', async () => {
    const port = String(await freePort());
    const mpi = await startRanks(
      [0, 1, 2].map((rank) => ({
        OMPI_COMM_WORLD_RANK: String(rank),
        OMPI_COMM_WORLD_SIZE: '3',
        OMPI_COMM_WORLD_LOCAL_RANK: String(rank),
        OMPI_COMM_WORLD_LOCAL_SIZE: '3',
        MASTER_PORT: port,
      })),
    );
    expect(
      mpi.map((r) => r.code),
      mpi.map((r) => r.out).join('\n'),
    ).toEqual([0, 0, 0]);
    expect(mpi[2].out).toContain('rank 2 of 3: sum=6');
    const slurmPort = String(await freePort());
    const slurm = await startRanks(
      [0, 1].map((rank) => ({
        SLURM_PROCID: String(rank),
        SLURM_NTASKS: '2',
        SLURM_LOCALID: String(rank),
        SLURM_NODEID: '0',
        SLURM_JOB_NODELIST: 'localhost',
        MASTER_PORT: slurmPort,
      })),
    );
    expect(
      slurm.map((r) => r.code),
      slurm.map((r) => r.out).join('\n'),
    ).toEqual([0, 0]);
    expect(slurm[1].out).toContain('rank 1 of 2: sum=3');
    // Rank 0 made each job's directory, named after its pid, and removed it.
    expect(jobDirectoriesOf([...mpi, ...slurm].map((r) => r.pid))).toEqual([]);
  });
});

describe('a rank 0 that cannot serve the rendezvous', { timeout: 60_000 }, () => {
  /** The rank's "failed after N ms: …" line (test/fixtures/timed-rank.ts): how long it lived, and why. */
  const failure = (run: ChildRun) => {
    const m = run.out.match(/^failed after (\d+) ms: (.*)$/m);
    expect(m, run.out).not.toBeNull();
    return { ms: Number(m?.[1]), message: m?.[2] };
  };

  it("fails every rank at once, with rank 0's reason, when the master is not loopback and there is no secret", async () => {
    const port = String(await freePort());
    // 192.0.2.1 is TEST-NET-1: nobody answers there, so a rank that tried to connect would wait out its 20 s.
    const runs = await startRanks(
      [0, 1, 2].map((rank) => ({
        RANK: String(rank),
        WORLD_SIZE: '3',
        MASTER_ADDR: '192.0.2.1',
        MASTER_PORT: port,
      })),
      [...timedRank, '20000'],
    );
    for (const run of runs) {
      const { ms, message } = failure(run);
      expect(message).toBe(
        'RendezvousAuthError: the rendezvous server binds 192.0.2.1, which is not loopback, so it needs a shared secret: set TENSORCOMM_RENDEZVOUS_SECRET to the same secret of at least 16 characters for every rank (`openssl rand -hex 32` makes one), or MASTER_ADDR=127.0.0.1 when every rank runs on this machine',
      );
      expect(ms).toBeLessThan(5_000);
    }
  });

  it('a rank that finds no server names the likely causes, and under Slurm says how srun ends the job', async () => {
    const port = String(await freePort());
    const master = { MASTER_ADDR: '127.0.0.1', MASTER_PORT: port };
    const [slurm, torchrun] = await startRanks(
      [
        { SLURM_PROCID: '1', SLURM_NTASKS: '2', ...master },
        { RANK: '1', WORLD_SIZE: '2', ...master },
      ],
      [...timedRank, '500'],
    );
    const causes = `RendezvousUnreachableError: rank 1 could not connect to the rendezvous server at 127.0.0.1:${port} within 500 ms (ECONNREFUSED). Rank 0 serves the rendezvous: it may have failed or exited before serving it (see its output), MASTER_ADDR:MASTER_PORT (127.0.0.1:${port}) may not be rank 0's host and a port free there, or a firewall may block that port`;
    expect(failure(slurm).message).toBe(
      `${causes}; run srun with --kill-on-bad-exit=1, so that the first task to fail ends the others at once`,
    );
    // torchrun ends the job at the first failure itself.
    expect(failure(torchrun).message).toBe(causes);
  });
});
