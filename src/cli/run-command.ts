/**
 * `tensorcomm run --nproc-per-node P [options] script [script args]`: the
 * script as P processes with torchrun's environment, alone or as one node of
 * a job of several (torchrun's flags); exits non-zero naming the failed
 * rank(s) when one fails, on any node.
 */
import { parseArgs } from 'node:util';
import { launchProcesses } from '../launch/launch-processes.ts';
import { readPredictReport } from '../predict/report-checks.ts';
import { loadClusterConfig } from '../runtime/config/load.ts';
import { JobFailedError } from '../runtime/errors.ts';
import { type Device, parseDevice } from '../tensor/dtype.ts';
import { showLines } from './predict.ts';

const USAGE = `usage: tensorcomm run --nproc-per-node P [options] script.js [script args]
       on every node of a job of several, with the same --nnodes, --master-addr and --master-port:
       tensorcomm run --nnodes N --node-rank K --nproc-per-node P --master-addr HOST --master-port PORT script.js

options:
  --nproc-per-node P        rank processes on this node (required; --nproc P is the same)
  --nnodes N                nodes of the job, one 'tensorcomm run' each (default 1)
  --node-rank K             this node, 0..nnodes-1 (default 0); ranks K*P..K*P+P-1 run here
  --master-addr HOST        where node 0's launcher serves the rendezvous, which every node reaches
                            (default 127.0.0.1; others need TENSORCOMM_RENDEZVOUS_SECRET on every node)
  --master-port PORT        its port (default: a free one; required with --nnodes above 1)
  --join-timeout S          how long the nodes' launchers wait for each other at the start (default 300)
  --timeout S               stop the whole job after S seconds
  --collective-timeout S    default timeout of each collective (default 300)
  --grace S                 after a failure, seconds before the others get SIGTERM (then SIGKILL) (default 2)
  --config FILE             cluster config (YAML or JSON): compression, buffer pool, network emulation
  --names a,b,...           worker names for p2p, one per rank of the whole job (default rank-0, rank-1, ...)
  --args JSON               for a script whose default export is main(ctx, args): its args, as JSON
                            (e.g. --args '{"steps":10}'; default: undefined)
  --devices LIST            each rank's device on this node: one per rank (cpu,cuda:0,...), one for all
                            (cuda:0: ranks share GPU 0), or 'each' (local rank i on cuda:i) (default cpu)
  --predict TOPOLOGY        predict the job's time on TOPOLOGY (a preset: h100-nvlink, h200-nvlink,
                            a100-nvlink, h100-ib; or a .yaml/.json file); results stay exact
  --predict-report FILE     where the prediction's report goes (default predict.json); the table is printed
  --predict-trace FILE      also write the predicted timeline as a Perfetto trace

torchrun's underscore spellings work too (--nproc_per_node, --node_rank, --master_addr, --master_port).`;

const OPTIONS = {
  'nproc-per-node': { type: 'string' },
  nproc: { type: 'string' },
  nnodes: { type: 'string' },
  'node-rank': { type: 'string' },
  'master-addr': { type: 'string' },
  'master-port': { type: 'string' },
  'join-timeout': { type: 'string' },
  timeout: { type: 'string' },
  'collective-timeout': { type: 'string' },
  grace: { type: 'string' },
  config: { type: 'string' },
  names: { type: 'string' },
  args: { type: 'string' },
  devices: { type: 'string' },
  predict: { type: 'string' },
  'predict-report': { type: 'string' },
  'predict-trace': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** launchProcesses' own bound on the nodes of a job. */
const MAX_NODES = 1024;

class UsageError extends Error {}

/** torchrun's `--node_rank` is `--node-rank`: only the option's name changes, never its value. */
function dashed(arg: string): string {
  if (!arg.startsWith('--')) return arg;
  const equals = arg.indexOf('=');
  const name = equals < 0 ? arg : arg.slice(0, equals);
  return name.replaceAll('_', '-') + (equals < 0 ? '' : arg.slice(equals));
}

/** Options end at the first word that is neither an option nor an option's value: the script. */
function splitAtScript(argv: readonly string[]): { own: string[]; script?: string; rest: string[] } {
  const own: string[] = [];
  let i = 0;
  while (i < argv.length && argv[i].startsWith('-')) {
    const option = dashed(argv[i]);
    const name = option.replace(/^--?/, '').split('=')[0];
    const takesValue = (OPTIONS as Record<string, { type: string }>)[name]?.type === 'string';
    own.push(option);
    if (takesValue && !option.includes('=') && i + 1 < argv.length) own.push(argv[++i]);
    i++;
  }
  return { own, script: argv[i], rest: argv.slice(i + 1) };
}

function integer(text: string, flag: string, min: number, max: number): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new UsageError(`--${flag} must be an integer in ${min}..${max}, got ${JSON.stringify(text)}`);
  }
  return value;
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

/** --devices: a list (one per rank of this node), one device for every rank, or 'each' (local rank i on cuda:i). */
function devicesOption(text: string | undefined, nproc: number, nprocFlag: string): Device[] | undefined {
  if (text === undefined) return undefined;
  const list = text === 'each' ? Array.from({ length: nproc }, (_, i) => `cuda:${i}`) : text.split(',');
  const devices = list.length === 1 ? Array.from({ length: nproc }, () => list[0]) : list;
  if (devices.length !== nproc) {
    throw new UsageError(`--devices lists ${devices.length} devices for --${nprocFlag} ${nproc}`);
  }
  return devices.map((device) => {
    try {
      return parseDevice(device, '--devices');
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  });
}

/** --args: JSON, so a number stays a number and an object an object, as launchProcesses' `args` would be. */
function argsOption(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--args must be JSON, e.g. '{"steps":10}': ${(error as Error).message}`);
  }
}

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS }>>['values'];

/** The job's shape: ranks per node, nodes, this node, and where node 0 serves the rendezvous. */
function nodeOptions(values: Values) {
  if (values.nproc !== undefined && values['nproc-per-node'] !== undefined)
    throw new UsageError('--nproc is an alias of --nproc-per-node: give one of them');
  const nprocFlag = values.nproc === undefined ? 'nproc-per-node' : 'nproc';
  const nprocText = values.nproc ?? values['nproc-per-node'];
  if (nprocText === undefined) throw new UsageError("--nproc is required (torchrun's --nproc-per-node too)");
  const nproc = number(nprocText, nprocFlag, true)!;
  const nnodes = values.nnodes === undefined ? 1 : integer(values.nnodes, 'nnodes', 1, MAX_NODES);
  const nodeRank =
    values['node-rank'] === undefined
      ? 0
      : integer(values['node-rank'], 'node-rank', 0, Number.MAX_SAFE_INTEGER);
  if (nodeRank >= nnodes)
    throw new UsageError(`--node-rank ${nodeRank} is not a node of --nnodes ${nnodes} (0..${nnodes - 1})`);
  const masterPort =
    values['master-port'] === undefined ? undefined : integer(values['master-port'], 'master-port', 1, 65535);
  if (nnodes > 1 && masterPort === undefined) {
    throw new UsageError(
      `--nnodes ${nnodes} needs --master-port: the port node 0's launcher serves the rendezvous on, the same on every node`,
    );
  }
  return {
    nproc,
    nnodes,
    nodeRank,
    masterAddr: values['master-addr'],
    masterPort,
    joinTimeoutMs: seconds(values['join-timeout'], 'join-timeout'),
    devices: devicesOption(values.devices, nproc, nprocFlag),
  };
}

/** --predict and its files; the files without --predict are a mistake, not ignored. */
function predictOption(values: Values) {
  const topology = values.predict;
  if (topology === undefined) {
    const stray = (['predict-report', 'predict-trace'] as const).find((flag) => values[flag] !== undefined);
    if (stray) throw new UsageError(`--${stray} needs --predict TOPOLOGY`);
    return undefined;
  }
  return {
    topology,
    report: values['predict-report'] ?? 'predict.json',
    trace: values['predict-trace'],
  };
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
    const shape = nodeOptions(values);
    if (script === undefined) throw new UsageError('no script given');
    launch = {
      ...shape,
      timeoutMs: seconds(values.timeout, 'timeout'),
      collectiveTimeoutMs: seconds(values['collective-timeout'], 'collective-timeout'),
      graceMs: seconds(values.grace, 'grace'),
      names: values.names?.split(','),
      args: argsOption(values.args),
      config: values.config === undefined ? undefined : loadClusterConfig(values.config),
      scriptArgs: rest,
      predict: predictOption(values),
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
    // Node 0's rank 0 wrote the report; other nodes have nothing to show.
    const report = launch.predict?.report;
    if (report !== undefined && (launch.nodeRank ?? 0) === 0) {
      for (const line of showLines(report, readPredictReport(report))) console.log(line);
    }
    return 0;
  } catch (error) {
    const message = error instanceof JobFailedError ? error.message : String(error);
    console.error(`tensorcomm run: ${message}`);
    return 1;
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop);
  }
}
