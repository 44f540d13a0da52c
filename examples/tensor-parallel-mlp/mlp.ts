/**
 * A two-layer MLP (x W1 + b1 -> GeLU -> W2 + b2, mean squared error) on
 * Float32Arrays, written once for any slice of the hidden layer: with the
 * whole hidden layer and a no-op reduction it is the single-rank model; with
 * a rank's columns of W1 and rows of W2 and a real allReduce it is one
 * Megatron tensor-parallel rank.
 */

export interface Sizes {
  batch: number;
  input: number;
  hidden: number;
  output: number;
}

/** Row-major parameters; on a tensor-parallel rank w1, b1 and w2 hold only its hidden units. */
export interface Params {
  w1: Float32Array; // [input, hidden]
  b1: Float32Array; // [hidden]
  w2: Float32Array; // [hidden, output]
  b2: Float32Array; // [output]
}

/** Sums a partial [rows, cols] result over the ranks (identity on a single rank). */
export type AllReduce = (partial: Float32Array, shape: [number, number]) => Promise<Float32Array>;

/** Deterministic values in [-scale, scale), different per `salt`. */
export function wave(length: number, salt: number, scale: number): Float32Array {
  return Float32Array.from({ length }, (_, i) => scale * Math.sin(i * 1.618 + salt * 2.399));
}

export function initialParams(s: Sizes): Params {
  return {
    w1: wave(s.input * s.hidden, 1, 1 / Math.sqrt(s.input)),
    b1: wave(s.hidden, 2, 0.1),
    w2: wave(s.hidden * s.output, 3, 1 / Math.sqrt(s.hidden)),
    b2: wave(s.output, 4, 0.1),
  };
}

export function syntheticBatch(s: Sizes): { x: Float32Array; y: Float32Array } {
  return { x: wave(s.batch * s.input, 5, 1), y: wave(s.batch * s.output, 6, 0.5) };
}

/** C[m,n] = op(A) op(B), accumulating in doubles; op transposes when asked (A stored [k,m], B stored [n,k]). */
function matmul(
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
  { transA = false, transB = false } = {},
): Float32Array {
  const c = new Float32Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let sum = 0;
      for (let p = 0; p < k; p++)
        sum += (transA ? a[p * m + i] : a[i * k + p]) * (transB ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = sum;
    }
  }
  return c;
}

function addRows(m: Float32Array, row: Float32Array): void {
  for (let i = 0; i < m.length; i++) m[i] += row[i % row.length];
}

function columnSums(m: Float32Array, cols: number): Float32Array {
  const out = new Float32Array(cols);
  for (let i = 0; i < m.length; i++) out[i % cols] += m[i];
  return out;
}

function sgd(param: Float32Array, grad: Float32Array, lr: number): void {
  for (let i = 0; i < param.length; i++) param[i] -= lr * grad[i];
}

// GeLU, tanh approximation (as in Megatron), and its derivative.
const C = Math.sqrt(2 / Math.PI);
const gelu = (h: number) => 0.5 * h * (1 + Math.tanh(C * (h + 0.044715 * h ** 3)));
function geluGrad(h: number): number {
  const t = Math.tanh(C * (h + 0.044715 * h ** 3));
  return 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * C * (1 + 3 * 0.044715 * h * h);
}

/**
 * One SGD step on the batch; `p` is updated in place. `hidden` is the number
 * of hidden units this caller holds. Exactly two reductions: the output of the
 * row-parallel layer (forward) and the input gradient (backward).
 */
export async function sgdStep(
  p: Params,
  batch: { x: Float32Array; y: Float32Array },
  s: Sizes & { lr: number },
  allReduce: AllReduce,
): Promise<{ loss: number; dx: Float32Array }> {
  const { batch: n, input, hidden, output } = s;
  const h = matmul(batch.x, p.w1, n, input, hidden);
  addRows(h, p.b1);
  const a = h.map(gelu);
  const z = await allReduce(matmul(a, p.w2, n, hidden, output), [n, output]);
  addRows(z, p.b2);

  let loss = 0;
  const dz = new Float32Array(z.length);
  for (let i = 0; i < z.length; i++) {
    const diff = z[i] - batch.y[i];
    loss += diff * diff;
    dz[i] = (2 * diff) / z.length;
  }
  loss /= z.length;

  const dw2 = matmul(a, dz, hidden, n, output, { transA: true });
  const da = matmul(dz, p.w2, n, output, hidden, { transB: true });
  const dh = da.map((g, i) => g * geluGrad(h[i]));
  const dw1 = matmul(batch.x, dh, input, n, hidden, { transA: true });
  const dx = await allReduce(matmul(dh, p.w1, n, hidden, input, { transB: true }), [n, input]);

  sgd(p.w1, dw1, s.lr);
  sgd(p.b1, columnSums(dh, hidden), s.lr);
  sgd(p.w2, dw2, s.lr);
  sgd(p.b2, columnSums(dz, output), s.lr);
  return { loss, dx };
}
