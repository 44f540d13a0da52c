/**
 * docs/benchmarks.md, written by a bench run (`npm run bench -- --markdown
 * docs/benchmarks.md`): each part's tables as the run printed them, under
 * what the part measures and how, headed by the machine, the Node and the
 * anchors' versions, so no figure in the docs is typed by hand. The README's
 * headline table is written from the same run (between its markers).
 */
import type { Log } from './cli.ts';

export interface BenchMachine {
  node: string;
  arch: string;
  cpus: number;
  cpuModel: string;
  date: string;
}

/** What a part measures and how (cold or warm, rounds, medians): printed above its tables. */
export type PartMethods = Readonly<Record<string, string>>;

interface Part {
  title: string;
  lines: string[];
}

/** Records what a bench run logs, part by part, and writes it as a page. */
export class BenchPage {
  readonly #parts: Part[] = [];

  /** The lines logged from now on belong to `title` (a part of the run). */
  begin(title: string): void {
    this.#parts.push({ title, lines: [] });
  }

  /** A log that records each line in the current part and passes it on to `next`. */
  recorder(next: Log): Log {
    return (line) => {
      this.#parts.at(-1)?.lines.push(line);
      next(line);
    };
  }

  /** The page: machine and versions, then each part's method and its tables, in run order. */
  markdown(machine: BenchMachine, anchorVersions: readonly string[], methods: PartMethods): string {
    const out = [
      '# Benchmarks',
      '',
      '<!-- Written by `npm run bench -- --markdown docs/benchmarks.md`; edits by hand are lost at the next run. -->',
      '',
      `Measured ${machine.date.slice(0, 10)} on ${machine.cpus} × ${machine.cpuModel} (${machine.arch}), Node ${machine.node}.`,
      `Anchors: ${anchorVersions.join('; ')}.`,
      'Every ratio compares figures of this one run; the machine is shared, so absolute figures drift from run to run more than the ratios do.',
      '',
    ];
    for (const part of this.#parts) {
      const method = methods[part.title];
      if (method === undefined)
        throw new Error(`benchmarks page: no method written for the part "${part.title}"`);
      out.push(`## ${part.title}`, '', method, '', ...blocks(part.lines), '');
    }
    return `${out
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .trimEnd()}\n`;
  }
}

/**
 * A part's log as markdown: its `# ` remarks as text, and each run of table
 * lines (a header, which starts with '#', and its rows) in a fixed-width block,
 * nccl-tests' layout kept.
 */
function blocks(lines: readonly string[]): string[] {
  const out: string[] = [];
  let table: string[] = [];
  const endTable = () => {
    if (table.length > 0) out.push('```text', ...table, '```', '');
    table = [];
  };
  lines.forEach((line, i) => {
    const next = lines[i + 1];
    const isRow = line.trim() !== '' && !line.startsWith('#');
    const isHeader =
      line.startsWith('#') && next !== undefined && next.trim() !== '' && !next.startsWith('#');
    if (isRow || isHeader) {
      table.push(line);
      return;
    }
    endTable();
    if (line.trim() !== '') out.push(line.replace(/^#\s?/, ''), '');
  });
  endTable();
  return out;
}

/** `text` with the lines between `<!-- name:start -->` and `<!-- name:end -->` replaced by `lines`. */
export function replaceBetweenMarkers(text: string, name: string, lines: readonly string[]): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`no ${start} … ${end} markers to write between`);
  return `${text.slice(0, from + start.length)}\n${lines.join('\n')}\n${text.slice(to)}`;
}
