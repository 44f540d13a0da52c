/**
 * examples/gpu runs against the built package: on a GPU (or the test double)
 * it must print every rank's checks as ok; without one it must say what is
 * missing and exit with status 1.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { nodeScript } from '../fixtures/node-script.ts';
import { gpu } from './gpu-mode.ts';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;

function example(placement: string) {
  return run(process.execPath, ['--import', 'tsx', 'examples/gpu/main.ts'], {
    cwd: root,
    env: { ...process.env, WORLD_SIZE: '2', PLACEMENT: placement },
    timeout: 120_000,
  });
}

describe('examples/gpu', () => {
  it.runIf(gpu.kind === 'none')('without a GPU: says what is missing and exits 1', async () => {
    const failure = await example('shared').then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(/examples\/gpu: Tensor\.zeros: device 'cuda:0' is not available: /);
  });

  it.runIf(gpu.kind !== 'none')('two ranks sharing GPU 0 pass their checks', async () => {
    const { stdout } = await example('shared');
    expect(stdout.match(/: ok$/gm)).toHaveLength(2);
    expect(stdout).toContain('rank-1 on cuda:0: allReduce = 3 (expected 3), allGatherInto = [0,0,1,1]');
  });

  it.runIf(gpu.kind !== 'none' && gpu.devices >= 2 && gpu.ncclSkipReason === undefined)(
    'two ranks on distinct GPUs (NCCL) pass their checks',
    async () => {
      const { stdout } = await example('distinct');
      expect(stdout.match(/: ok$/gm)).toHaveLength(2);
      expect(stdout).toContain('rank-1 on cuda:1: allReduce = 3 (expected 3)');
    },
  );
});

describe('tensorcomm run --devices', () => {
  it.runIf(gpu.kind !== 'none')(
    'gives each process its device: one list, one for all, or each its own',
    async () => {
      const cli = [...(await nodeScript('src/cli/tensorcomm.ts')), 'run', '--nproc', '2'];
      const script = 'test/fixtures/process-script.ts';
      const devicesOf = async (flag: string) => {
        const { stdout } = await run(process.execPath, [...cli, '--devices', flag, script], {
          cwd: root,
          timeout: 60_000,
        });
        return [0, 1].map((r) => stdout.match(new RegExp(`\\[rank ${r}\\].*device=(\\S+)`))?.[1]);
      };
      expect(await devicesOf('cuda:0')).toEqual(['cuda:0', 'cuda:0']);
      expect(await devicesOf('cpu,cuda:0')).toEqual(['cpu', 'cuda:0']);
      // NCCL between processes: a real GPU machine only (the test double runs NCCL ranks as threads).
      if (gpu.kind === 'real' && gpu.devices >= 2 && gpu.ncclSkipReason === undefined) {
        expect(await devicesOf('each')).toEqual(['cuda:0', 'cuda:1']);
      }
    },
    180_000,
  );
});
