/** Which Open MPI and torch (gloo) the anchors ran on, for the benchmarks page's head. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const exec = promisify(execFile);

async function firstLine(file: string, args: readonly string[]): Promise<string | undefined> {
  try {
    const { stdout } = await exec(file, args, { timeout: 30_000 });
    return stdout.split('\n')[0]?.trim() || undefined;
  } catch {
    return undefined;
  }
}

export async function anchorVersions(): Promise<string[]> {
  const mpi = (await firstLine('mpirun', ['--version']))?.match(/Open MPI\)\s*(\S+)/)?.[1];
  const torch = await firstLine('/usr/bin/python3', ['-c', 'import torch; print(torch.__version__)']);
  return [
    `Node primitives on Node ${process.version}`,
    mpi ? `Open MPI ${mpi}` : 'Open MPI not installed',
    torch ? `torch ${torch} (gloo)` : 'torch (gloo) not installed',
  ];
}
