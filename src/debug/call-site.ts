/**
 * The user's call site of a communication call. Capturing a stack costs a
 * few microseconds (as much as a tenth of a small allReduce), formatting it
 * ten times more, so a call only captures the raw frames, formatted when an
 * error or a report needs them, and SiteBudget keeps the capturing within a
 * fixed share of the rank's time.
 */
import { fileURLToPath } from 'node:url';
import { BUNDLE_CACHE_DIR } from '../runtime/bundle-cache.ts';

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
/**
 * The most one capture is charged: above what a warm one costs, source maps on
 * too, far below a cold one (a new call path, V8's source positions made
 * on first use) or one the scheduler interrupted on a loaded machine. Both are
 * one-off wall time, not the steady cost the share bounds.
 */
const MAX_CHARGE_MS = 0.025;

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

export interface SiteBudgetOptions {
  /** The share of the rank's time captures may take, in the long run. */
  share?: number;
  /** The most the bucket holds, in milliseconds of capturing: a start-up's worth of cold captures. */
  creditMs?: number;
  /** For tests: the clock and the capture. */
  now?: () => number;
  capture?: () => CapturedSite;
}

/**
 * Captures sites while their cost stays under `share` of the rank's time: a
 * token bucket that earns `share` of each elapsed millisecond, holds at most
 * `creditMs` (so idle periods cannot bank a burst), and pays each capture's
 * measured cost, at most MAX_CHARGE_MS. Calls made milliseconds apart always
 * get a site, and so do a job's first 80 calls however slowly their
 * sites come; in a hot loop of tiny calls some go without, which
 * bounds the cost instead of the loop's speed.
 */
export class SiteBudget {
  readonly #share: number;
  readonly #creditMs: number;
  readonly #now: () => number;
  readonly #capture: () => CapturedSite;
  #tokensMs: number;
  #last: number;

  constructor(options: SiteBudgetOptions = {}) {
    this.#share = options.share ?? 0.005;
    this.#creditMs = options.creditMs ?? 2;
    this.#now = options.now ?? (() => performance.now());
    this.#capture = options.capture ?? captureSite;
    this.#tokensMs = this.#creditMs;
    this.#last = this.#now();
  }

  capture(): CapturedSite | undefined {
    const now = this.#now();
    this.#tokensMs = Math.min(this.#creditMs, this.#tokensMs + (now - this.#last) * this.#share);
    this.#last = now;
    if (this.#tokensMs <= 0) return undefined;
    const site = this.#capture();
    const after = this.#now();
    this.#tokensMs -= Math.min(after - now, MAX_CHARGE_MS);
    this.#last = after;
    return site;
  }
}

/** Node's, or tensorcomm's: its sources, its build, or a rank bundle's chunk of its code alone (which has no source map). */
function isOwnFrame(line: string): boolean {
  return (
    line.includes('(node:') ||
    line.includes(BUNDLE_CACHE_DIR) ||
    OWN_FOLDERS.some((folder) => line.includes(folder))
  );
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
