/**
 * Decoder fuzz: every decoder of bytes another party writes (p2p header,
 * weight-sync bucket header and stream end, file-store value header and ring
 * records, network-store frames, rendezvous frames) is fed a seeded stream
 * of malformed messages made from valid ones (test/fuzz/), and must accept
 * each or refuse it with its own error class.
 *
 *   npx tsx bench/fuzz.ts [--inputs N] [--seed S] [--json <file>]
 *
 * N inputs per decoder (default 1,000,000), seed S (default 12345). Prints a
 * row per decoder as it finishes; exits 1 when any decoder threw a foreign
 * exception, after printing the first few offending inputs as hex. A
 * robustness check with no speed goal, so `npm run bench` does not run it;
 * `npm test` runs a seeded slice of it (test/decoder-fuzz.test.ts).
 */
import { parseArgs } from 'node:util';
import { type FuzzReport, fuzzDecoder } from '../test/fuzz/run-fuzz.ts';
import { DECODER_TARGETS } from '../test/fuzz/targets/index.ts';
import { isMainModule, type Log, writeJson } from './cli.ts';
import { type Column, fixed, formatTable } from './table.ts';

const USAGE = 'usage: npx tsx bench/fuzz.ts [--inputs N] [--seed S] [--json <file>]';

const COLUMNS: readonly Column<FuzzReport>[] = [
  { title: 'decoder', width: 28, cell: (r) => r.decoder },
  { title: 'inputs', width: 10, cell: (r) => String(r.inputs) },
  { title: 'accepted', width: 10, cell: (r) => String(r.accepted) },
  { title: 'refused', width: 10, cell: (r) => String(r.refused) },
  { title: 'foreign', width: 9, cell: (r) => String(r.foreign) },
  { title: 'time(s)', width: 9, cell: (r) => fixed(r.ms / 1000, 1) },
  { title: 'slowest(ms)', width: 12, cell: (r) => fixed(r.slowestMs, 1) },
];

function nonNegativeInteger(text: string | undefined, fallback: number, flag: string): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new TypeError(
      `bench/fuzz: ${flag} must be a non-negative integer, got ${JSON.stringify(text)}; ${USAGE}`,
    );
  }
  return value;
}

export function parseFuzzArgs(argv: readonly string[]): { inputs: number; seed: number; json?: string } {
  let values: { inputs?: string; seed?: string; json?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { inputs: { type: 'string' }, seed: { type: 'string' }, json: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new TypeError(`bench/fuzz: ${(error as Error).message}; ${USAGE}`);
  }
  return {
    inputs: nonNegativeInteger(values.inputs, 1_000_000, '--inputs'),
    seed: nonNegativeInteger(values.seed, 12345, '--seed'),
    json: values.json,
  };
}

/** Fuzzes every decoder; the reports, one per decoder, in the order of the table. */
export async function main(argv: readonly string[] = process.argv.slice(2), log: Log = console.log) {
  const { inputs, seed, json } = parseFuzzArgs(argv);
  log(`# decoder fuzz: ${inputs} inputs per decoder, seed ${seed}`);
  log("# refused: with the decoder's own error class; foreign: any other exception (a bug)");
  log('# slowest: the longest one input took, garbage collection and other processes included');
  log(formatTable(COLUMNS, [])[0]);
  const reports: FuzzReport[] = [];
  for (const target of DECODER_TARGETS) {
    const report = fuzzDecoder(target, { inputs, seed });
    reports.push(report);
    log(formatTable(COLUMNS, [report])[1]);
  }
  for (const report of reports.filter((r) => r.foreign > 0)) {
    log('');
    log(`# ${report.decoder}: ${report.foreign} foreign exceptions; the first ${report.offending.length}:`);
    for (const o of report.offending) log(`#   ${o.error}\n#     made by: ${o.how}\n#     ${o.hex}`);
  }
  if (json !== undefined) await writeJson(json, reports, log);
  return reports;
}

if (isMainModule(import.meta.url)) {
  const reports = await main();
  if (reports.some((r) => r.foreign > 0)) process.exitCode = 1;
}
