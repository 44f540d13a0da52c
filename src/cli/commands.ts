/**
 * The `tensorcomm` command's subcommands: one per file in this folder, each a
 * function from its arguments to an exit code, so tests can call them directly.
 */
import { benchCommand } from './bench.ts';
import { cacheCommand } from './cache.ts';
import { predictCommand } from './predict.ts';
import { runCommand } from './run-command.ts';
import { traceCommand } from './trace.ts';

type Subcommand = (argv: string[]) => Promise<number>;

const SUBCOMMANDS: Record<string, { run: Subcommand; summary: string }> = {
  run: { run: runCommand, summary: 'run a script as N processes (torchrun-style environment)' },
  bench: { run: benchCommand, summary: 'collective benchmark table (nccl-tests layout), JSON and SVG' },
  trace: { run: traceCommand, summary: 'per-op summary of a trace file (TENSORCOMM_TRACE)' },
  predict: {
    run: predictCommand,
    summary: 'predicted time: show a report, diff two, calibrate this machine',
  },
  cache: {
    run: cacheCommand,
    summary: 'where rank-thread bundles are cached, their size; --clear empties it',
  },
};

function usage(): string {
  const lines = Object.entries(SUBCOMMANDS).map(([name, { summary }]) => `  ${name.padEnd(8)} ${summary}`);
  return `usage: tensorcomm <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n'tensorcomm <command> --help' describes a command.`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  const command = SUBCOMMANDS[name];
  if (!command) {
    console.error(`tensorcomm: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return command.run(rest);
}

process.exitCode = await main(process.argv.slice(2));
