/**
 * Anchors: what a user would use instead of tensorcomm, measured on this
 * machine in the same run (the machines are shared and noisy, so only
 * same-run ratios mean much). The scripts live in ../shared/anchors beside the
 * repository; see its README for what each one measures.
 *
 *   npx tsx bench/anchors.ts [--quick] [--json <file>]
 *
 * An anchor whose toolchain is not installed is skipped with the command that
 * installs it; one that fails is reported and the bench goes on.
 */
import { execFile } from 'node:child_process';
import { constants, existsSync } from 'node:fs';
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { benchMain, isMainModule, type Log } from './cli.ts';
import { fixed } from './table.ts';

const exec = promisify(execFile);

/** Figures by the scripts' own names, e.g. p2p_rtt_us, allreduce_busGBps_67108864. */
export type Figures = Record<string, number>;

export interface Anchor {
  figures?: Figures;
  /** Why there are no figures: not installed, --quick, or the error it failed with. */
  skipped?: string;
  seconds?: number;
}

export interface AnchorsReport {
  dir: string;
  node: Anchor;
  gloo: Anchor;
  mpi: Anchor;
}

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
export const ANCHORS_DIR = resolve(REPO_ROOT, '../shared/anchors');

/** Debian's python holds python3-torch; a python from a venv on PATH usually does not. */
const PYTHON = '/usr/bin/python3';
const MINUTE_MS = 60_000;

async function onPath(command: string): Promise<boolean> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    try {
      await access(join(dir, command), constants.X_OK);
      return true;
    } catch {}
  }
  return false;
}

async function succeeds(file: string, args: readonly string[]): Promise<boolean> {
  try {
    await exec(file, args, { timeout: MINUTE_MS });
    return true;
  } catch {
    return false;
  }
}

/** Runs one anchor, timing it; a failure becomes a `skipped` line rather than ending the bench. */
async function measured(run: () => Promise<Figures>): Promise<Anchor> {
  const started = performance.now();
  try {
    const figures = await run();
    return { figures, seconds: (performance.now() - started) / 1000 };
  } catch (error) {
    const message = (error as Error).message.trim().split('\n').slice(0, 3).join(' | ');
    return { skipped: `failed: ${message}` };
  }
}

async function nodePrimitives(dir: string): Promise<Anchor> {
  return measured(async () => {
    const { stdout } = await exec(process.execPath, [join(dir, 'node_primitives.mjs')], {
      timeout: 5 * MINUTE_MS,
    });
    return JSON.parse(stdout) as Figures;
  });
}

/** gloo_bench.py with `world` processes (gloo always talks TCP, here over loopback). */
export async function gloo(dir: string, quick: boolean, world = 2): Promise<Anchor> {
  if (!(await succeeds(PYTHON, ['-c', 'import torch']))) {
    return { skipped: 'python3-torch not installed; apt-get install -y python3-torch' };
  }
  // Starting two torch processes and its slow small-message path take ~10 s, a third of the quick budget.
  if (quick) return { skipped: 'not run with --quick (takes ~10 s)' };
  return withTempDir('tensorcomm-gloo-', (tmp) =>
    measured(async () => {
      // Our own output file: the script's default one in /tmp is shared with anyone else running it.
      const out = join(tmp, `gloo_${world}.json`);
      await exec(PYTHON, [join(dir, 'gloo_bench.py'), String(world), out], { timeout: 5 * MINUTE_MS });
      return JSON.parse(await readFile(out, 'utf8')) as Figures;
    }),
  );
}

/**
 * mpi_bench prints `name value` lines, except allreduce lines that carry two
 * figures: `allreduce_us_<bytes> <us> busGBps <GB/s>`. Both become gloo's names.
 */
export function parseMpiOutput(stdout: string): Figures {
  const figures: Figures = {};
  for (const line of stdout.split('\n')) {
    const allReduce = /^allreduce_us_(\d+)\s+(\S+)\s+busGBps\s+(\S+)$/.exec(line.trim());
    const plain = /^(\w+)\s+(\S+)$/.exec(line.trim());
    if (allReduce) {
      figures[`allreduce_us_${allReduce[1]}`] = Number(allReduce[2]);
      figures[`allreduce_busGBps_${allReduce[1]}`] = Number(allReduce[3]);
    } else if (plain) figures[plain[1]] = Number(plain[2]);
  }
  return figures;
}

/** mpi_bench.c with `np` processes; `btl` picks Open MPI's transports (e.g. 'tcp,self'; default shared memory). */
export async function mpi(dir: string, np = 2, btl?: string): Promise<Anchor> {
  if (!((await onPath('mpicc')) && (await onPath('mpirun')))) {
    return { skipped: 'Open MPI not installed; apt-get install -y openmpi-bin libopenmpi-dev' };
  }
  return withTempDir('tensorcomm-mpi-', (tmp) =>
    measured(async () => {
      const binary = join(tmp, 'mpi_bench');
      await exec('mpicc', ['-O2', '-o', binary, join(dir, 'mpi_bench.c')], { timeout: MINUTE_MS });
      const { stdout } = await exec(
        'mpirun',
        [
          '--allow-run-as-root',
          '--oversubscribe',
          ...(btl ? ['--mca', 'btl', btl] : []),
          '-np',
          String(np),
          binary,
        ],
        { timeout: 5 * MINUTE_MS },
      );
      return parseMpiOutput(stdout);
    }),
  );
}

/**
 * mpi_oversubscribed.c: Open MPI's 1 KiB allreduce in µs at each of `nps`
 * process counts (more ranks than cores: --oversubscribe, so idle ranks
 * yield), compiled once; `repeats` runs per count, in turn, for medians.
 */
export async function mpiOversubscribed(
  nps: readonly number[],
  repeats: number,
): Promise<{ us: Record<number, number[]> } | { skipped: string }> {
  if (!((await onPath('mpicc')) && (await onPath('mpirun')))) {
    return { skipped: 'Open MPI not installed; apt-get install -y openmpi-bin libopenmpi-dev' };
  }
  return withTempDir('tensorcomm-mpi-ov-', async (tmp) => {
    const binary = join(tmp, 'mpi_oversubscribed');
    await exec('mpicc', ['-O2', '-o', binary, join(ANCHORS_DIR, 'mpi_oversubscribed.c')], {
      timeout: MINUTE_MS,
    });
    const us: Record<number, number[]> = {};
    for (let r = 0; r < repeats; r++) {
      for (const np of nps) {
        const args = ['--allow-run-as-root', '--oversubscribe', '-np', String(np), binary];
        const { stdout } = await exec('mpirun', args, { timeout: 5 * MINUTE_MS });
        (us[np] ??= []).push((JSON.parse(stdout) as { allreduce_1KiB_us: number }).allreduce_1KiB_us);
      }
    }
    return { us };
  });
}

/**
 * bench/floors/tcp_exchange.c: two C processes exchanging 64 MiB each way over
 * loopback at once and doing nothing else. A two-rank allReduce of 64 MiB moves
 * exactly that, so its bus bandwidth cannot pass this figure on this machine,
 * whatever the library. `port`: a free loopback port.
 */
export async function tcpExchangeFloor(port: number): Promise<Anchor> {
  if (!(await onPath('cc'))) return { skipped: 'no C compiler (cc) on PATH' };
  return withTempDir('tensorcomm-floor-', async (tmp) => {
    const started = performance.now();
    try {
      const binary = join(tmp, 'tcp_exchange');
      const source = join(REPO_ROOT, 'bench/floors/tcp_exchange.c');
      await exec('cc', ['-O2', '-pthread', '-o', binary, source], { timeout: MINUTE_MS });
      const listening = exec(binary, ['listen', String(port)], { timeout: MINUTE_MS });
      const [{ stdout }] = await Promise.all([
        exec(binary, ['dial', String(port)], { timeout: MINUTE_MS }),
        listening,
      ]);
      const [name, value] = stdout.trim().split(' ');
      return { figures: { [name]: Number(value) }, seconds: (performance.now() - started) / 1000 };
    } catch (error) {
      return { skipped: `failed: ${(error as Error).message.split('\n')[0]}` };
    }
  });
}

async function withTempDir<T>(prefix: string, use: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function describe(name: string, anchor: Anchor, summary: (f: Figures) => string): string {
  if (!anchor.figures) return `# ${name}: skipped (${anchor.skipped})`;
  return `# ${name}: ${summary(anchor.figures)}  [${fixed(anchor.seconds)} s]`;
}

export function printAnchors(report: AnchorsReport, log: Log): void {
  log(`# anchors, same run (${report.dir})`);
  log(
    describe(
      'node',
      report.node,
      (f) =>
        `worker threads: round trip ${fixed(f.spin_rtt_us)} us spinning, ${fixed(f.wait_notify_rtt_us)} us Atomics.wait/notify, ` +
        `${fixed(f.post_message_rtt_us)} us postMessage; TypedArray.set 64 MiB ${fixed(f.copy_GBps_67108864)} GB/s`,
    ),
  );
  const p2p = (f: Figures) =>
    `p2p round trip ${fixed(f.p2p_rtt_us)} us, p2p 64 MiB ${fixed(f.p2p_GBps_67108864)} GB/s, ` +
    `allreduce 4 B ${fixed(f.allreduce_us_4)} us, 64 MiB busbw ${fixed(f.allreduce_busGBps_67108864)} GB/s`;
  log(describe('gloo', report.gloo, (f) => `torch.distributed, 2 processes: ${p2p(f)}`));
  log(describe('mpi', report.mpi, (f) => `Open MPI shared memory, 2 processes: ${p2p(f)}`));
  log('');
}

export async function runAnchors(options: { quick?: boolean; log?: Log } = {}): Promise<AnchorsReport> {
  const quick = options.quick ?? false;
  const dir = ANCHORS_DIR;
  const missing = { skipped: `anchor scripts not found in ${dir}` };
  // Awaited one after another (left to right): each anchor wants the machine's cores to itself.
  const report: AnchorsReport = existsSync(dir)
    ? { dir, node: await nodePrimitives(dir), gloo: await gloo(dir, quick), mpi: await mpi(dir) }
    : { dir, node: missing, gloo: missing, mpi: missing };
  printAnchors(report, options.log ?? console.log);
  return report;
}

export const main = benchMain('bench/anchors', runAnchors);

if (isMainModule(import.meta.url)) await main();
