/**
 * `tensorcomm predict <command>`: the reports a predicted job writes
 * (`predict.report`), read back. `show` prints one in nccl-tests' layout,
 * `diff` compares two call by call; `calibrate` writes a topology of this
 * machine (predict-calibrate.ts). Each command is an entry of
 * PREDICT_COMMANDS, so the usage text and the dispatch follow from the table.
 */
import type { PredictedCall, PredictReport } from '../predict/report.ts';
import { readPredictReport } from '../predict/report-checks.ts';
import { diffReports, type OpDiff, type RankDiff } from '../predict/report-diff.ts';
import {
  type PredictedOpRow,
  type PredictedRankRow,
  predictedEnd,
  predictedOpRows,
  predictedRankRows,
} from '../predict/report-table.ts';
import { type Column, fixed, formatTable } from './bench/table.ts';
import { CALIBRATE_HELP, calibrateCommand, parseCalibrateArgs } from './predict-calibrate.ts';

type Log = (line: string) => void;

interface PredictSubcommand {
  /** Its arguments, for the usage line. */
  args: string;
  summary: string;
  /** What `<command> --help` adds below the summary (options). */
  help?: string;
  /** Arguments after the command's name, --help already answered; an exception is a failure (exit 1). */
  run: (argv: string[], log: Log) => number | Promise<number>;
}

const PREDICT_COMMANDS: Record<string, PredictSubcommand> = {
  show: {
    args: '<report.json>',
    summary: 'per kind of call, per rank and for the job: the predicted times (nccl-tests layout)',
    run: (argv, log) => withFiles('show', argv, 1, ([file]) => showLines(file, readPredictReport(file)), log),
  },
  diff: {
    args: '<a.json> <b.json>',
    summary: 'two reports call by call (by rank, group, seq, op): per op, per rank, the job; ratios b / a',
    run: (argv, log) =>
      withFiles(
        'diff',
        argv,
        2,
        ([a, b]) => diffLines([a, b], [readPredictReport(a), readPredictReport(b)]),
        log,
      ),
  },
  calibrate: {
    args: '[options]',
    summary: "time this machine's ranks and write a topology of alpha-beta links",
    help: CALIBRATE_HELP,
    run: (argv, log) => {
      const options = checkedUsage('calibrate', () => parseCalibrateArgs(argv));
      return options === undefined ? 2 : calibrateCommand(options, log);
    },
  },
};

function commandUsage(name: string): string {
  const { args, summary, help } = PREDICT_COMMANDS[name];
  return `usage: tensorcomm predict ${name} ${args}\n\n${summary}${help ? `\n\n${help}` : ''}`;
}

/** The command's options, or undefined once a bad one has been reported with the usage (exit 2). */
function checkedUsage<T>(name: string, parse: () => T): T | undefined {
  try {
    return parse();
  } catch (error) {
    console.error(`tensorcomm predict ${name}: ${(error as Error).message}\n\n${commandUsage(name)}`);
    return undefined;
  }
}

export const PREDICT_USAGE = `usage: tensorcomm predict <command> [arguments]

Reads the report a predicted job wrote (predict: { report } on spawnThreads, rankTest, launchProcesses),
or writes a topology of this machine.

commands:
${Object.entries(PREDICT_COMMANDS)
  .map(([name, { args, summary }]) => `  ${`${name} ${args}`.padEnd(24)} ${summary}`)
  .join('\n')}

'tensorcomm predict <command> --help' describes a command.`;

export async function predictCommand(argv: string[], log: Log = console.log): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h') {
    log(PREDICT_USAGE);
    return 0;
  }
  const command =
    name !== undefined && Object.hasOwn(PREDICT_COMMANDS, name) ? PREDICT_COMMANDS[name] : undefined;
  if (!command) {
    const problem = name === undefined ? 'expected a command' : `unknown command "${name}"`;
    console.error(`tensorcomm predict: ${problem}\n\n${PREDICT_USAGE}`);
    return 2;
  }
  if (rest[0] === '--help' || rest[0] === '-h') {
    log(commandUsage(name));
    return 0;
  }
  try {
    return await command.run(rest, log);
  } catch (error) {
    console.error(`tensorcomm predict ${name}: ${(error as Error).message}`);
    return 1;
  }
}

/** Runs `lines` on exactly `count` file arguments and logs them; another count is a usage error (2). */
function withFiles(
  name: string,
  argv: string[],
  count: number,
  lines: (files: string[]) => string[],
  log: Log,
): number {
  if (argv.length !== count) {
    console.error(
      `tensorcomm predict ${name}: expected ${count} report file${count > 1 ? 's' : ''}, got ${argv.length}\n\n${commandUsage(name)}`,
    );
    return 2;
  }
  for (const line of lines(argv)) log(line);
  return 0;
}

const OP_COLUMNS: readonly Column<PredictedOpRow>[] = [
  { title: 'group', width: 10, cell: (r) => r.group },
  { title: 'op', width: 16, cell: (r) => r.op },
  { title: 'size(B)', width: 12, cell: (r) => String(r.bytes) },
  { title: 'calls', width: 8, cell: (r) => String(r.calls) },
  { title: 'algorithm', width: 11, cell: (r) => r.algorithm },
  { title: 'protocol', width: 10, cell: (r) => r.protocol },
  { title: 'time(us)', width: 12, cell: (r) => fixed(r.timeUs) },
  { title: 'algbw(GB/s)', width: 13, cell: (r) => fixed(r.algbwGBps) },
  { title: 'busbw(GB/s)', width: 13, cell: (r) => fixed(r.busbwGBps) },
];

const RANK_COLUMNS: readonly Column<PredictedRankRow>[] = [
  { title: 'rank', width: 6, cell: (r) => String(r.rank) },
  { title: 'end(us)', width: 13, cell: (r) => fixed(r.endUs) },
  { title: 'compute(us)', width: 13, cell: (r) => fixed(r.computeUs) },
  { title: 'comm(us)', width: 13, cell: (r) => fixed(r.commUs) },
  { title: 'exposed(us)', width: 13, cell: (r) => fixed(r.exposedCommUs) },
  { title: 'overlapped(us)', width: 16, cell: (r) => fixed(r.overlappedCommUs) },
  { title: 'wait(us)', width: 13, cell: (r) => fixed(r.waitUs) },
];

function describeReport(report: PredictReport): string {
  return `predicted on ${report.topology}: ${report.ranks.length} ranks, ${report.calls.length} calls`;
}

/** `predict show`'s lines for a report (`tensorcomm run --predict` prints them too). */
export function showLines(file: string, report: PredictReport): string[] {
  const end = predictedEnd(report);
  return [
    `# ${file}: ${describeReport(report)} (a collective counts once per rank)`,
    ...formatTable(OP_COLUMNS, predictedOpRows(report)),
    '',
    '# per rank: overlapped = comm - exposed (hidden behind compute), wait = for stragglers',
    ...formatTable(RANK_COLUMNS, predictedRankRows(report)),
    '',
    `# predicted end: ${fixed(end.endUs)} us (rank ${end.rank})`,
  ];
}

/** b / a to three places; Infinity when a took no time and b some. */
function ratioCell(ratio: number | undefined): string {
  if (ratio === undefined) return '-';
  return Number.isFinite(ratio) ? ratio.toFixed(3) : 'inf';
}

const OP_DIFF_COLUMNS: readonly Column<OpDiff>[] = [
  { title: 'op', width: 16, cell: (r) => r.op },
  { title: 'calls', width: 8, cell: (r) => String(r.calls) },
  { title: 'a_total(us)', width: 14, cell: (r) => fixed(r.aUs) },
  { title: 'b_total(us)', width: 14, cell: (r) => fixed(r.bUs) },
  { title: 'b/a', width: 8, cell: (r) => ratioCell(r.ratio) },
];

const RANK_DIFF_COLUMNS: readonly Column<RankDiff>[] = [
  { title: 'rank', width: 6, cell: (r) => String(r.rank) },
  { title: 'a_end(us)', width: 14, cell: (r) => fixed(r.aEndUs) },
  { title: 'b_end(us)', width: 14, cell: (r) => fixed(r.bEndUs) },
  { title: 'b/a', width: 8, cell: (r) => ratioCell(r.ratio) },
];

/** How many unmatched calls a diff lists by name before it only counts them. */
const LISTED_UNMATCHED = 10;

function unmatchedLines(file: string, calls: readonly PredictedCall[]): string[] {
  if (calls.length === 0) return [];
  const listed = calls.slice(0, LISTED_UNMATCHED).map((c) => {
    const peer = c.peer === undefined ? '' : ` peer ${c.peer}`;
    return `#   rank ${c.rank} ${c.group} seq ${c.seq} ${c.op} ${c.bytes} B${peer}`;
  });
  const more = calls.length - listed.length;
  return [
    `# ${calls.length} calls only in ${file}:`,
    ...listed,
    ...(more > 0 ? [`#   ... and ${more} more`] : []),
  ];
}

function diffLines(files: [string, string], reports: [PredictReport, PredictReport]): string[] {
  const diff = diffReports(reports[0], reports[1], files);
  const [a, b] = files;
  return [
    `# a: ${a}, ${describeReport(reports[0])}`,
    `# b: ${b}, ${describeReport(reports[1])}`,
    `# ${diff.matched} calls in both (matched by rank, group, seq, op); b/a below 1: b is faster`,
    ...formatTable(OP_DIFF_COLUMNS, diff.ops),
    '',
    ...formatTable(RANK_DIFF_COLUMNS, diff.ranks),
    '',
    ...unmatchedLines(a, diff.onlyInA),
    ...unmatchedLines(b, diff.onlyInB),
    `# predicted end: a ${fixed(diff.end.aUs)} us, b ${fixed(diff.end.bUs)} us, b/a ${ratioCell(diff.end.ratio)}`,
  ];
}
