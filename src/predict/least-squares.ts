/**
 * Non-negative least squares for the few unknowns of a calibration fit: the x >= 0 that makes
 * |A x - b| smallest. The problem is convex, so its minimum is the plain least-squares solution on
 * one face of the orthant (some unknowns held at 0, the others free), the best such solution that is
 * itself non-negative. A fit has at most four unknowns: trying all 2^k faces is exact, and shorter
 * than an active-set method (Lawson and Hanson's).
 */

/**
 * Below this a pivot of the normal equations counts as 0, the columns as dependent. The columns are
 * scaled to length 1 first, so a pivot is 1 - R^2 of its column against those before it.
 */
const DEPENDENT = 1e-12;

const dot = (a: readonly number[], b: readonly number[]) => a.reduce((sum, v, i) => sum + v * b[i], 0);

/** The least-squares x for the columns of A and b; undefined where the columns are dependent. */
function leastSquares(
  columns: readonly (readonly number[])[],
  targets: readonly number[],
): number[] | undefined {
  const k = columns.length;
  const norms = columns.map((column) => Math.sqrt(dot(column, column)));
  if (norms.some((norm) => !(norm > 0))) return undefined;
  const unit = columns.map((column, j) => column.map((v) => v / norms[j]));
  // The normal equations [AᵀA | Aᵀb], by Gauss-Jordan elimination: AᵀA is symmetric positive
  // (semi)definite, so the diagonal serves as pivot, and each pivot is what its column adds.
  const m = unit.map((ci) => [...unit.map((cj) => dot(ci, cj)), dot(ci, targets)]);
  for (let j = 0; j < k; j++) {
    if (!(m[j][j] > DEPENDENT)) return undefined;
    for (let i = 0; i < k; i++) {
      if (i === j) continue;
      const factor = m[i][j] / m[j][j];
      for (let c = j; c <= k; c++) m[i][c] -= factor * m[j][c];
    }
  }
  return m.map((row, j) => row[k] / row[j] / norms[j]);
}

/** |A x - b|^2, A given by its columns. */
function squaredMisfit(
  columns: readonly (readonly number[])[],
  x: readonly number[],
  targets: readonly number[],
): number {
  let sum = 0;
  for (const [i, target] of targets.entries()) {
    const fitted = columns.reduce((s, column, j) => s + column[i] * x[j], 0);
    sum += (fitted - target) ** 2;
  }
  return sum;
}

/**
 * The non-negative x minimizing |A x - b|, A given by its columns; undefined where the columns are
 * dependent (no x is the best one: the points cannot tell those unknowns apart).
 */
export function nonNegativeLeastSquares(
  columns: readonly (readonly number[])[],
  targets: readonly number[],
): number[] | undefined {
  if (!leastSquares(columns, targets)) return undefined;
  let best: { x: number[]; misfit: number } | undefined;
  for (let face = 0; face < 1 << columns.length; face++) {
    const free = columns.flatMap((_, j) => (face & (1 << j) ? [j] : []));
    const chosen = free.map((j) => columns[j]);
    const solved = free.length === 0 ? [] : leastSquares(chosen, targets);
    if (!solved || solved.some((v) => v < 0)) continue;
    const x = columns.map(() => 0);
    for (const [i, j] of free.entries()) x[j] = solved[i];
    const misfit = squaredMisfit(columns, x, targets);
    if (!best || misfit < best.misfit) best = { x, misfit };
  }
  // The face with every unknown at 0 is always feasible.
  return best?.x;
}
