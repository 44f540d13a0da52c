/**
 * `tensorcomm run --nproc N [options] script [script args]`: the script as N
 * processes with torchrun's environment; exits non-zero naming the failed
 * rank(s) when one fails.
 */
import { parseArgs } from 'node:util';
import { launchProcesses } from '../launch/launch-processes.ts';
import { loadClusterConfig } from '../runtime/config/load.ts';
import { JobFailedError } from '../runtime/errors.ts';
import { type Device, parseDevice } from '../tensor/dtype.ts';

const USAGE = `usage: tensorcomm run --nproc N [options] script.js [script args]

options:
  --nproc N                 number of rank processes (required)
  --timeout S               stop the whole job after S seconds
  --collective-timeout S    default timeout of each collective (default 300)
  --grace S                 after a failure, seconds before the others get SIGTERM (then SIGKILL) (default 2)
  --config FILE             cluster config (YAML or JSON): compression, buffer pool, network emulation
  --names a,b,...           worker names for p2p (default rank-0, rank-1, ...)
  --devices LIST            each rank's device: one per rank (cpu,cuda:0,...), one for all
                            (cuda:0: ranks share GPU 0), or 'each' (rank i on cuda:i) (default cpu)
  --master-addr HOST        rendezvous address (default 127.0.0.1; others need TENSORCOMM_RENDEZVOUS_SECRET)
  --master-port PORT        rendezvous port (default: a free one)`;

const OPTIONS = {
  nproc: { type: 'string' },
  timeout: { type: 'string' },
  'collective-timeout': { type: 'string' },
  grace: { type: 'string' },
  config: { type: 'string' },
  names: { type: 'string' },
  devices: { type: 'string' },
  'master-addr': { type: 'string' },
  'master-port': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

class UsageError extends Error {}

/** Options end at the first word that is neither an option nor an option's value: the script. */
function splitAtScript(argv: readonly string[]): { own: string[]; script?: string; rest: string[] } {
  let i = 0;
  while (i < argv.length && argv[i].startsWith('-')) {
    const name = argv[i].replace(/^--?/, '').split('=')[0];
    const takesValue = (OPTIONS as Record<string, { type: string }>)[name]?.type === 'string';
    i += takesValue && !argv[i].includes('=') ? 2 : 1;
  }
  return { own: argv.slice(0, i), script: argv[i], rest: argv.slice(i + 1) };
}

function number(text: string | undefined, flag: string, integer: boolean): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!(value > 0) || (integer && !Number.isSafeInteger(value))) {
    throw new UsageError(
      `--${flag} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(text)}`,
    );
  }
  return value;
}

function seconds(text: string | undefined, flag: string): number | undefined {
  const value = number(text, flag, false);
  return value === undefined ? undefined : Math.round(value * 1000);
}

/** --devices: a list (one per rank), one device for every rank, or 'each' (rank i on cuda:i). */
function devicesOption(text: string | undefined, nproc: number): Device[] | undefined {
  if (text === undefined) return undefined;
  const list = text === 'each' ? Array.from({ length: nproc }, (_, i) => `cuda:${i}`) : text.split(',');
  const devices = list.length === 1 ? Array.from({ length: nproc }, () => list[0]) : list;
  if (devices.length !== nproc) {
    throw new UsageError(`--devices lists ${devices.length} devices for --nproc ${nproc}`);
  }
  return devices.map((device) => {
    try {
      return parseDevice(device, '--devices');
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  });
}

export async function runCommand(argv: string[]): Promise<number> {
  const { own, script, rest } = splitAtScript(argv);
  let launch: Parameters<typeof launchProcesses>[1];
  try {
    const { values } = parseArgs({ args: own, options: OPTIONS, strict: true, allowPositionals: false });
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    if (values.nproc === undefined) throw new UsageError('--nproc is required');
    if (script === undefined) throw new UsageError('no script given');
    launch = {
      nproc: number(values.nproc, 'nproc', true)!,
      timeoutMs: seconds(values.timeout, 'timeout'),
      collectiveTimeoutMs: seconds(values['collective-timeout'], 'collective-timeout'),
      graceMs: seconds(values.grace, 'grace'),
      names: values.names?.split(','),
      devices: devicesOption(values.devices, number(values.nproc, 'nproc', true)!),
      config: values.config === undefined ? undefined : loadClusterConfig(values.config),
      masterAddr: values['master-addr'],
      masterPort: number(values['master-port'], 'master-port', true),
      scriptArgs: rest,
    };
  } catch (error) {
    console.error(`tensorcomm run: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }

  const controller = new AbortController();
  const stop = (signal: NodeJS.Signals) => controller.abort(signal);
  process.on('SIGINT', stop).on('SIGTERM', stop);
  try {
    await launchProcesses(script, { ...launch, signal: controller.signal });
    return 0;
  } catch (error) {
    const message = error instanceof JobFailedError ? error.message : String(error);
    console.error(`tensorcomm run: ${message}`);
    return 1;
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop);
  }
}
