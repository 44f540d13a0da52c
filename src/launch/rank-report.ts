/** What a rank (thread or process) reports to its launcher, exactly once. */

export interface ErrorReport {
  name: string;
  message: string;
  stack: string;
}

export type RankReport = { kind: 'result'; value: unknown } | { kind: 'error'; error: ErrorReport };

export function errorReport(error: unknown): RankReport {
  const err = error instanceof Error ? error : new Error(String(error));
  return { kind: 'error', error: { name: err.name, message: err.message, stack: err.stack ?? '' } };
}

export function reviveError(report: ErrorReport): Error {
  const error = new Error(report.message);
  error.name = report.name;
  error.stack = report.stack;
  return error;
}
