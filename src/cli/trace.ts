/**
 * `tensorcomm trace <file>`: the summary of a trace written with
 * TENSORCOMM_TRACE (or DebugOptions.trace): per op, how many calls, their
 * bytes, total time and bus bandwidth, over all ranks.
 */
import { readFileSync } from 'node:fs';
import type { ChromeTrace, TraceSummaryRow } from '../debug/trace.ts';
import { type Column, fixed, formatTable } from './bench/table.ts';

export const TRACE_USAGE = `usage: tensorcomm trace <trace.json>

Prints the per-op summary of a trace file: calls, bytes, total time, busbw.
Open the file itself in https://ui.perfetto.dev or chrome://tracing.`;

const SUMMARY_COLUMNS: readonly Column<TraceSummaryRow>[] = [
  { title: 'op', width: 22, cell: (r) => r.op },
  { title: 'count', width: 10, cell: (r) => String(r.count) },
  { title: 'bytes', width: 16, cell: (r) => String(r.bytes) },
  { title: 'total(ms)', width: 12, cell: (r) => fixed(r.totalUs / 1000, 3) },
  { title: 'busbw(GB/s)', width: 13, cell: (r) => fixed(r.busbw) },
];

export function formatTraceSummary(rows: readonly TraceSummaryRow[]): string[] {
  return formatTable(SUMMARY_COLUMNS, rows);
}

function readTrace(file: string): ChromeTrace {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<ChromeTrace>;
  if (parsed.otherData?.tool !== 'tensorcomm' || !Array.isArray(parsed.traceEvents)) {
    throw new TypeError(`${file} is not a tensorcomm trace (no otherData.tool = "tensorcomm")`);
  }
  return parsed as ChromeTrace;
}

export async function traceCommand(
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<number> {
  if (argv[0] === '--help' || argv[0] === '-h') {
    log(TRACE_USAGE);
    return 0;
  }
  if (argv.length !== 1) {
    console.error(`tensorcomm trace: expected one trace file\n\n${TRACE_USAGE}`);
    return 2;
  }
  let trace: ChromeTrace;
  try {
    trace = readTrace(argv[0]);
  } catch (error) {
    console.error(`tensorcomm trace: ${(error as Error).message}`);
    return 1;
  }
  const calls = trace.traceEvents.filter((e) => e.ph === 'X').length;
  log(
    `# ${argv[0]}: ${trace.otherData.worldSize} ranks, ${calls} calls (${trace.otherData.droppedEvents} dropped)`,
  );
  for (const line of formatTraceSummary(trace.otherData.summary)) log(line);
  return 0;
}
