/**
 * Calibration's fit: a link's alpha (latency) and bandwidth from timed calls, by least squares over
 * the sizes. Each call's time is what the alpha-beta model says for it, which is linear in alpha and
 * in 1/B (send: alpha + S/B; allReduce of 2 ranks: 2 alpha + S/B; ...), so calls of several ops fit
 * one link together, each weighted by the model's own coefficients.
 */
import { type AlphaBetaLink, type AlphaBetaOp, alphaBetaTime } from './alpha-beta.ts';

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

/** A point as coefficients of alpha and of 1/B (in microseconds per GB/s): us = a alpha + b / B. */
function coefficients(point: CalibrationPoint): { a: number; b: number } {
  const { op, ranks, bytes } = point;
  return {
    a: alphaBetaTime(op, ranks, bytes, { alphaUs: 1, bandwidthGBps: Number.POSITIVE_INFINITY }).us,
    b: alphaBetaTime(op, ranks, bytes, { alphaUs: 0, bandwidthGBps: 1 }).us,
  };
}

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

/**
 * Alpha and bandwidth that make the model's times closest to the points'. The squares are of the
 * relative error: times span three or more decades over the sizes, and plain squares would let the
 * largest size alone decide, leaving alpha whatever absorbs its noise (often below zero). A fit whose
 * alpha comes out negative is redone with alpha 0; times that do not grow with the size (no bandwidth
 * to see) are a RangeError.
 */
export function fitAlphaBeta(points: readonly CalibrationPoint[]): AlphaBetaFit {
  checkPoints(points);
  // Weighted normal equations for x = [alpha, 1/B], each row divided by its measured time.
  let aa = 0;
  let ab = 0;
  let bb = 0;
  let at = 0;
  let bt = 0;
  for (const p of points) {
    const { a, b } = coefficients(p);
    const w = 1 / (p.us * p.us);
    aa += w * a * a;
    ab += w * a * b;
    bb += w * b * b;
    at += w * a * p.us;
    bt += w * b * p.us;
  }
  const det = aa * bb - ab * ab;
  // Zero when every point has the same ratio of alpha to bytes (a send of S beside an allReduce of 2S).
  if (!(det > 1e-12 * aa * bb)) {
    throw new RangeError('fitAlphaBeta: the points cannot tell latency from bandwidth; add another size');
  }
  let alphaUs = (at * bb - bt * ab) / det;
  let inverseBandwidth = (aa * bt - ab * at) / det;
  if (alphaUs < 0) {
    alphaUs = 0;
    inverseBandwidth = bt / bb;
  }
  if (!(inverseBandwidth > 0)) {
    throw new RangeError(
      'fitAlphaBeta: the times do not grow with the size, so no bandwidth can be fitted; measure larger sizes',
    );
  }
  const link = { alphaUs, bandwidthGBps: 1 / inverseBandwidth };
  const squares = points.map((p) => (alphaBetaTime(p.op, p.ranks, p.bytes, link).us / p.us - 1) ** 2);
  return { ...link, rmsError: Math.sqrt(squares.reduce((s, e) => s + e, 0) / points.length) };
}
