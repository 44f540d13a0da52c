/**
 * Ranks a real srun started, in a one-node Slurm cluster the test starts and
 * stops (test/fixtures/slurm-cluster.ts): initProcess reads srun's own
 * environment, and a job whose rank 0 refuses to serve the rendezvous (no
 * secret, a master address that is not loopback) fails on every rank at once
 * with rank 0's reason, where the other ranks used to retry for 300 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChildRun, startCollecting } from './fixtures/child-run.ts';
import { freePort } from './fixtures/free-port.ts';
import { nodeScript } from './fixtures/node-script.ts';
import { type SlurmCluster, slurmUnavailable, startSlurmCluster } from './fixtures/slurm-cluster.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const RANKS = 4;
/** Far below the 300 s a rank waited for a rank 0 that refused, far above srun's start of 4 Node processes. */
const SRUN_DEADLINE_MS = 30_000;

const unavailable = slurmUnavailable();
if (unavailable)
  console.warn(`test/slurm.test.ts skipped: a Slurm cluster cannot start here: ${unavailable}`);

describe.skipIf(unavailable !== undefined)('ranks srun started', { timeout: 60_000 }, () => {
  let cluster: SlurmCluster | undefined;
  beforeAll(async () => {
    cluster = await startSlurmCluster();
  });
  afterAll(() => cluster?.stop());

  /** `srun --label -n 4` of the timed rank, killed at the deadline so a regression fails instead of hanging. */
  async function srun(env: Record<string, string>): Promise<ChildRun & { ms: number }> {
    if (!cluster) throw new Error('the Slurm cluster did not start');
    const rank = await nodeScript('test/fixtures/timed-rank.ts');
    const started = performance.now();
    const child = startCollecting(cluster.srun, ['--label', '-n', `${RANKS}`, process.execPath, ...rank], {
      cwd: ROOT,
      env: { ...cluster.env, MASTER_PORT: `${await freePort()}`, ...env },
    });
    const timer = setTimeout(child.kill, SRUN_DEADLINE_MS);
    const run = await child.ended;
    clearTimeout(timer);
    return { ...run, ms: performance.now() - started };
  }

  /** Each rank's line, by its srun label. */
  const lines = (out: string) =>
    Array.from({ length: RANKS }, (_, r) => out.match(new RegExp(`^${r}: (.*)$`, 'm'))?.[1] ?? '');

  it("without the secret every rank fails at once, with rank 0's reason", async () => {
    const run = await srun({});
    expect(run.signal, `srun ran past ${SRUN_DEADLINE_MS} ms:\n${run.out}`).toBeNull();
    expect(run.code, run.out).not.toBe(0);
    const reason = `RendezvousAuthError: the rendezvous server binds ${cluster?.node}, which is not loopback, so it needs a shared secret: set TENSORCOMM_RENDEZVOUS_SECRET`;
    for (const [r, line] of lines(run.out).entries()) {
      expect(line, `rank ${r}:\n${run.out}`).toContain(reason);
      const lived = Number(line.match(/^failed after (\d+) ms/)?.[1]);
      expect(lived, `rank ${r}: ${line}`).toBeLessThan(5_000);
    }
    console.log(
      `srun -n ${RANKS} without the secret: every rank failed, srun ended after ${Math.round(run.ms)} ms`,
    );
  });

  it('with the secret the same job runs, each rank knowing itself from srun', async () => {
    const run = await srun({ TENSORCOMM_RENDEZVOUS_SECRET: 'a-secret-for-the-slurm-test-0123456789' });
    expect(run.code, run.out).toBe(0);
    expect(lines(run.out)).toEqual(
      Array.from({ length: RANKS }, (_, r) => `rank ${r} of ${RANKS}: sum=${(RANKS * (RANKS + 1)) / 2}`),
    );
  });
});
