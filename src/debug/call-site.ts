/**
 * The user's call site of a communication call. Capturing a stack costs a
 * few microseconds (as much as a tenth of a small allReduce), formatting it
 * ten times more, so a call only captures the raw frames, formatted when an
 * error or a report needs them, and SiteBudget keeps the capturing within a
 * fixed share of the rank's time.
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

/**
 * Captures sites while their total cost stays under `share` of the time since
 * the budget started (plus a small credit, so the first calls always get one).
 * Calls made seconds apart always get a site; in a hot loop of tiny calls
 * some go without, which bounds the cost instead of the loop's speed.
 */
export class SiteBudget {
  readonly #startedAt = performance.now();
  #spentMs = 0;

  constructor(
    readonly share = 0.03,
    readonly creditMs = 5,
  ) {}

  capture(): CapturedSite | undefined {
    const now = performance.now();
    if (this.#spentMs > (now - this.#startedAt) * this.share + this.creditMs) return undefined;
    const site = captureSite();
    this.#spentMs += performance.now() - now;
    return site;
  }
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
