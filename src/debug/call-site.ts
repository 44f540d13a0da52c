/**
 * The user's call site of a communication call. Capturing a stack costs a
 * few microseconds (as much as a tenth of a small allReduce), formatting it
 * ten times more, so a call only captures the raw frames, formatted when an
 * error or a report needs them, and SiteBudget keeps the capturing within a
 * fixed share of the rank's time.
 */
import { fileURLToPath } from 'node:url';

/**
 * tensorcomm's own folders: its frames are not the user's. Both, whichever
 * this module runs from: an installed package runs dist/, but with source
 * maps on (tsx, --enable-source-maps) its frames come back as src/.
 */
export const OWN_FOLDERS = ['src', 'dist'].map((folder) =>
  fileURLToPath(new URL(`../../${folder}/`, import.meta.url)),
);
const CAPTURED_FRAMES = 12;
const SHOWN_FRAMES = 3;
/** Far above a warm capture (a few µs), far below a cold one. */
const MAX_CHARGE_MS = 0.1;

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
 * Captures sites while their cost stays under `share` of the rank's time: a
 * token bucket that earns `share` of each elapsed millisecond, holds at most
 * `creditMs` (so idle periods cannot bank a burst), and pays each capture's
 * measured cost. Calls made milliseconds apart always get a site; in a hot
 * loop of tiny calls some go without, which bounds the cost instead of the
 * loop's speed.
 */
export class SiteBudget {
  #tokensMs: number;
  #last = performance.now();

  constructor(
    readonly share = 0.005,
    readonly creditMs = 2,
  ) {
    this.#tokensMs = creditMs;
  }

  capture(): CapturedSite | undefined {
    const now = performance.now();
    this.#tokensMs = Math.min(this.creditMs, this.#tokensMs + (now - this.#last) * this.share);
    this.#last = now;
    if (this.#tokensMs <= 0) return undefined;
    const site = captureSite();
    const after = performance.now();
    // A process's first captures pay for warming V8's stack machinery (and a source-map loader's):
    // milliseconds, once. Charged in full, that debt would leave the next calls without a site.
    this.#tokensMs -= Math.min(after - now, MAX_CHARGE_MS);
    this.#last = after;
    return site;
  }
}

function isOwnFrame(line: string): boolean {
  return line.includes('(node:') || OWN_FOLDERS.some((folder) => line.includes(folder));
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
