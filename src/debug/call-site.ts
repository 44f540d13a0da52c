/**
 * The user's call site of a communication call. Capturing a stack costs a
 * few microseconds, formatting it ten times more, so a call only captures
 * the raw frames; they are formatted when an error or a report needs them.
 */
import { fileURLToPath } from 'node:url';

/** tensorcomm's own source folder (src/ or dist/): its frames are not the user's. */
const OWN_FOLDER = fileURLToPath(new URL('../', import.meta.url));
const CAPTURED_FRAMES = 12;
const SHOWN_FRAMES = 3;

export interface CapturedSite {
  stack?: string;
}

export function captureSite(): CapturedSite {
  const site: CapturedSite = {};
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = CAPTURED_FRAMES;
  Error.captureStackTrace(site);
  Error.stackTraceLimit = limit;
  return site;
}

function isOwnFrame(line: string): boolean {
  return line.includes(OWN_FOLDER) || line.includes(`file://${OWN_FOLDER}`) || line.includes('(node:');
}

/** The first user frames, innermost first, as "fn (file:line:col)" joined by " <- "; undefined when none. */
export function formatSite(site: CapturedSite | undefined): string | undefined {
  const lines = site?.stack?.split('\n').slice(1) ?? [];
  const user = lines
    .map((l) => l.trim().replace(/^at /, ''))
    .filter((l) => l !== '' && !isOwnFrame(l))
    .slice(0, SHOWN_FRAMES);
  return user.length > 0 ? user.join(' <- ') : undefined;
}
