/** What a rank (thread or process) reports to its launcher, exactly once. */
import { inspect } from 'node:util';

export interface ErrorReport {
  name: string;
  message: string;
  stack: string;
  /** The error's string `code` (tensorcomm's ERR_TC_…, Node's ERR_… and E…), so the launcher's side can match on it. */
  code?: string;
  /** What a failed assertion compared (vitest's expect, node:assert), so the test runner can show the diff. */
  assertion?: AssertionDetails;
}

export interface AssertionDetails {
  actual: unknown;
  expected: unknown;
  showDiff?: boolean;
  operator?: string;
}

export type RankReport = { kind: 'result'; value: unknown } | { kind: 'error'; error: ErrorReport };

export function errorReport(error: unknown): RankReport {
  return { kind: 'error', error: describeError(error) };
}

export function describeError(error: unknown): ErrorReport {
  // Only to report a thrown value that is no Error.
  const err = error instanceof Error ? error : new Error(String(error));
  const report: ErrorReport = { name: err.name, message: err.message, stack: err.stack ?? '' };
  const { code } = err as { code?: unknown };
  if (typeof code === 'string') report.code = code;
  const assertion = assertionOf(err);
  if (assertion) report.assertion = assertion;
  return report;
}

/** A value as it can cross to the launcher: itself when it clones, else as printed (a function, a class instance with private state). */
function sendable(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    return inspect(value, { depth: 6 });
  }
}

function assertionOf(error: Error): AssertionDetails | undefined {
  const fields = error as Error & Partial<AssertionDetails>;
  if (!('actual' in fields) || !('expected' in fields)) return undefined;
  const details: AssertionDetails = { actual: sendable(fields.actual), expected: sendable(fields.expected) };
  if (typeof fields.showDiff === 'boolean') details.showDiff = fields.showDiff;
  if (typeof fields.operator === 'string') details.operator = fields.operator;
  return details;
}

/**
 * A rank's error on the launcher's side: a plain Error with the rank's name, message, stack and code
 * (docs/errors.md, "Across threads and processes"), so `error.name` and `error.code` match there.
 */
export function reviveError(report: ErrorReport): Error {
  const error = new Error(report.message);
  error.name = report.name;
  error.stack = report.stack;
  if (report.code !== undefined) Object.assign(error, { code: report.code });
  if (report.assertion) Object.assign(error, report.assertion);
  return error;
}
