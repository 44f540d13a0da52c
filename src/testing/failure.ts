/**
 * A failed rank test as vitest shows it: one error per failing rank, each
 * `rank N: …` with the rank's own diff (actual/expected travel from the
 * rank) and stack (so vitest prints the line of the test file), a rank that
 * only stopped because another failed in one line, a hang report once.
 */
import { dropRepeatedHangReports } from '../debug/hang-report.ts';
import { BUNDLE_CACHE_DIR } from '../runtime/bundle-cache.ts';
import { JobFailedError } from '../runtime/errors.ts';

const ASSERTION_FIELDS = ['actual', 'expected', 'showDiff', 'operator'] as const;

/** Why a body's variable can be missing in a rank thread: it is not the thread that ran the file for vitest. */
const REFERENCE_HINT =
  '\n(a rankTest body runs in each rank thread, which imports the test file itself: it can use the ' +
  "file's imports and top-level declarations, and variables of describe blocks, not a variable of an " +
  "enclosing function that only vitest's thread ran, values set by hooks, or vitest's globals: import them)";

/**
 * The `    at …` lines of a stack, without the message it starts with (which
 * may span lines), and without tensorcomm's frames in the rank bundle (its
 * chunks have no source map: a frame there points into a temporary file).
 */
function framesOf(stack: string | undefined): string {
  const lines = (stack ?? '').split('\n');
  const first = lines.findIndex((line) => /^\s+at /.test(line));
  if (first < 0) return '';
  return lines
    .slice(first)
    .filter((line) => !line.includes(BUNDLE_CACHE_DIR))
    .join('\n');
}

/**
 * The rank's error under `rank N: …`, keeping what the launcher kept of it: its class's name and its
 * code (a plain Error, as every rank error on the launcher's side is: rank-report.ts).
 */
function rankError(rank: number, original: Error, message: string): Error {
  // Stopped because another rank failed: that rank's error says what happened.
  const echo = original.name === 'RankFailedError';
  const text = echo ? message.split('\n')[0] : message;
  const error = new Error(`rank ${rank}: ${text}${original.name === 'ReferenceError' ? REFERENCE_HINT : ''}`);
  error.name = original.name;
  // The rank's frames under the new message (reporters print the stack); an echo's frames are
  // tensorcomm's own, no code frame is worth showing for it.
  const head = `${error.name}: ${error.message}`;
  error.stack = echo ? head : `${head}\n${framesOf(original.stack)}`;
  const fields = error as unknown as Record<string, unknown>;
  const { code } = original as { code?: unknown };
  if (typeof code === 'string') fields.code = code;
  for (const key of ASSERTION_FIELDS)
    if (key in original) fields[key] = (original as unknown as Record<string, unknown>)[key];
  return error;
}

export function rankTestFailure(error: unknown): unknown {
  if (!(error instanceof JobFailedError)) return error;
  const { failures } = error;
  const messages = dropRepeatedHangReports(
    failures.map(({ rank, error: e }) => ({ rank, message: e.message })),
  );
  const errors = failures.map(({ rank, error: e }, i) => rankError(rank, e, messages[i]));
  if (errors.length === 1) return errors[0];
  // vitest reports each error of an AggregateError on its own, with its diff and code frame.
  return new AggregateError(
    errors,
    `${errors.length} ranks failed: ${failures.map((f) => f.rank).join(', ')}`,
  );
}
