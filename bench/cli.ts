/** What the bench scripts share: their command line, the "run directly?" check and JSON output. */
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

export interface BenchArgs {
  /** Small sizes and few iterations: a smoke run that finishes in seconds. */
  quick: boolean;
  /** Also write the figures to this file. */
  json?: string;
  /** bench/run and bench/node-versions: the start-up and 4 B rows on this Node major, or on `all` (node-versions.ts). */
  node?: string;
  /** bench/run: also run the layers' benches and every Node version's rows, and write all the tables to this page. */
  markdown?: string;
}

export type Log = (line: string) => void;

export function parseBenchArgs(argv: readonly string[], script: string): BenchArgs {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        quick: { type: 'boolean', default: false },
        json: { type: 'string' },
        node: { type: 'string' },
        markdown: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    });
    return { quick: values.quick, json: values.json, node: values.node, markdown: values.markdown };
  } catch (error) {
    throw new TypeError(
      `${script}: ${(error as Error).message}; usage: [--quick] [--json <file>] [--node <major>|all] [--markdown <file>]`,
    );
  }
}

/** True when `moduleUrl` is the script node was started with (not an import). */
export function isMainModule(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && moduleUrl === pathToFileURL(resolve(process.argv[1])).href;
}

export async function writeJson(file: string, value: unknown, log: Log): Promise<void> {
  await writeFile(file, `${JSON.stringify(value, null, 1)}\n`);
  log(`# figures written to ${resolve(file)}`);
}

/** The `main(argv, log)` of a bench script: parse the flags, run it, write its figures as JSON when asked. */
export function benchMain<R>(
  script: string,
  run: (options: { quick: boolean; log: Log }) => Promise<R>,
): (argv?: readonly string[], log?: Log) => Promise<R> {
  return async (argv = process.argv.slice(2), log = console.log) => {
    const args = parseBenchArgs(argv, script);
    if (args.node !== undefined) {
      throw new TypeError(
        `${script} runs on the Node that runs it; --node is for bench/run and bench/node-versions`,
      );
    }
    if (args.markdown !== undefined) {
      throw new TypeError(
        `${script}: --markdown is for bench/run, which writes every part's tables to one page`,
      );
    }
    const report = await run({ quick: args.quick, log });
    if (args.json !== undefined) await writeJson(args.json, report, log);
    return report;
  };
}
