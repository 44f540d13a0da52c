/**
 * Calibration's fit: a link's alpha-beta terms from timed calls, by least squares over the sizes.
 * Each call's time is what the alpha-beta model says for it, which is linear in alpha and in the
 * inverse of each rate (send on 2 ranks: alpha + S/B; allToAll: alpha + S/2D; allReduce:
 * 2 alpha + S/D + S/2G; alpha-beta.ts), so calls of several ops fit one link together, each weighted
 * by the model's own terms: a one-way send brings out B, an exchange D, a reducing call beside the
 * exchange G.
 */
import {
  type AlphaBetaLink,
  type AlphaBetaOp,
  type AlphaBetaTerms,
  alphaBetaTerms,
  alphaBetaTime,
} from './alpha-beta.ts';
import { nonNegativeLeastSquares } from './least-squares.ts';

/** One timed call: `op` on `ranks` ranks over the link, `bytes` as nccl-tests counts them. */
export interface CalibrationPoint {
  op: AlphaBetaOp;
  ranks: number;
  bytes: number;
  /** Measured microseconds (for a send, one way: half a ping-pong's round trip). */
  us: number;
}

/** The fitted link, and how far the fit is from the points it came from. */
export interface AlphaBetaFit extends AlphaBetaLink {
  /** The root mean square of (predicted / measured - 1) over the points. */
  rmsError: number;
}

type Term = Exclude<keyof AlphaBetaTerms, 'schedule'>;

/** One model: its unknowns, each the terms that share it (alpha, or the inverse of one rate). */
type Model = readonly (readonly Term[])[];

/**
 * The models tried, fullest first; the first whose unknowns the points tell apart is kept. So points
 * without an exchange beside their one-way calls keep D = B, points without a reducing call beside
 * an exchange keep reductions free, and points of one kind fit one bandwidth for every call, the
 * plain model.
 */
const MODELS: readonly Model[] = [
  [['messages'], ['simplexBytes'], ['duplexBytes'], ['reducedBytes']],
  [['messages'], ['simplexBytes'], ['duplexBytes']],
  [['messages'], ['simplexBytes', 'duplexBytes'], ['reducedBytes']],
  [['messages'], ['simplexBytes', 'duplexBytes']],
];

/** A term's weight on its unknown: alpha a message; 1/(GB/s) a 1e3 bytes (1 GB/s is 1e3 bytes a microsecond). */
const coefficient = (terms: AlphaBetaTerms, term: Term) =>
  term === 'messages' ? terms.messages : terms[term] / 1000;

function checkPoints(points: readonly CalibrationPoint[]): void {
  for (const [i, p] of points.entries()) {
    if (!(Number.isFinite(p.us) && p.us > 0) || !(Number.isFinite(p.bytes) && p.bytes >= 0)) {
      throw new RangeError(
        `fitAlphaBeta: point ${i} (${p.op}) needs bytes >= 0 and a positive time, got ${p.bytes} B in ${p.us} us`,
      );
    }
    if (!Number.isInteger(p.ranks) || p.ranks < 2) {
      throw new RangeError(`fitAlphaBeta: point ${i} (${p.op}) needs 2 or more ranks, got ${p.ranks}`);
    }
  }
  if (new Set(points.map((p) => p.bytes)).size < 2) {
    throw new RangeError(
      'fitAlphaBeta: alpha and bandwidth need calls of at least two sizes (one size cannot tell latency from bandwidth)',
    );
  }
}

const noGrowth = (calls: string, rate: string) =>
  new RangeError(
    `fitAlphaBeta: ${calls} times do not grow with the size, so no ${rate} can be fitted; measure larger sizes`,
  );

/**
 * A model's unknowns as a link. The byte terms' unknowns are microseconds per 1e3 bytes, the inverse
 * of GB/s; a reduction's at 0 leaves reductions free, a bandwidth's at 0 (calls that take no longer
 * for more bytes) is a RangeError.
 */
function linkOf(model: Model, x: readonly number[]): AlphaBetaLink {
  const unknown = (term: Term) => model.findIndex((terms) => terms.includes(term));
  const simplex = unknown('simplexBytes');
  const duplex = unknown('duplexBytes');
  const reduce = unknown('reducedBytes');
  if (!(x[simplex] > 0)) throw noGrowth(duplex === simplex ? 'the' : "the one-way calls'", 'bandwidth');
  if (!(x[duplex] > 0)) throw noGrowth("the exchanges'", 'duplex bandwidth');
  return {
    alphaUs: x[unknown('messages')],
    bandwidthGBps: 1 / x[simplex],
    ...(duplex !== simplex && { duplexGBps: 1 / x[duplex] }),
    ...(reduce >= 0 && x[reduce] > 0 && { reduceGBps: 1 / x[reduce] }),
  };
}

/**
 * The link that makes the model's times closest to the points'. The squares are of the relative
 * error: times span three or more decades over the sizes, and plain squares would let the largest
 * size alone decide, leaving alpha whatever absorbs its noise. Every unknown is kept at 0 or above
 * (the best fit that is, not a negative alpha or rate). Points no model can tell latency from
 * bandwidth in, or whose times do not grow with the size (no bandwidth to see), are a RangeError.
 */
export function fitAlphaBeta(points: readonly CalibrationPoint[]): AlphaBetaFit {
  checkPoints(points);
  const terms = points.map((p) => alphaBetaTerms(p.op, p.ranks, p.bytes));
  // Each row divided by its measured time, against a target of 1.
  const column = (unknown: readonly Term[]) =>
    terms.map((t, i) => unknown.reduce((sum, term) => sum + coefficient(t, term), 0) / points[i].us);
  const ones = points.map(() => 1);
  for (const model of MODELS) {
    const x = nonNegativeLeastSquares(model.map(column), ones);
    if (!x) continue;
    const link = linkOf(model, x);
    const squares = points.map((p) => (alphaBetaTime(p.op, p.ranks, p.bytes, link).us / p.us - 1) ** 2);
    return { ...link, rmsError: Math.sqrt(squares.reduce((s, e) => s + e, 0) / points.length) };
  }
  throw new RangeError('fitAlphaBeta: the points cannot tell latency from bandwidth; add another size');
}
