/** Fixed-width tables in the nccl-tests style: right-aligned cells, a header line starting with '#'. */

export interface Column<R> {
  readonly title: string;
  readonly width: number;
  readonly cell: (row: R) => string;
}

/** The header and one line per row; the header's first character becomes '#' so tools can skip it. */
export function formatTable<R>(columns: readonly Column<R>[], rows: readonly R[]): string[] {
  const widths = columns.map((c) => Math.max(c.width, c.title.length + 1));
  const line = (cells: readonly string[]) => cells.map((cell, i) => cell.padStart(widths[i])).join('');
  const header = `#${line(columns.map((c) => c.title)).slice(1)}`;
  return [header, ...rows.map((row) => line(columns.map((c) => c.cell(row))))];
}

/** A figure with `digits` decimals, or '-' when it was not measured. */
export function fixed(value: number | undefined, digits = 2): string {
  return value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(digits);
}
