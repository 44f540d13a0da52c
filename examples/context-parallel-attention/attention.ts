/**
 * Single-head scaled dot-product attention on row-major Float32Arrays, two
 * ways: the textbook one (all scores of a query row, softmax, weighted sum of
 * V) and block by block with an online softmax (running max and running
 * sum, rescaled as larger scores arrive), which is what lets ring attention
 * see K/V one block at a time and still produce the exact result.
 */

/** Deterministic values in [-1, 1), different per `salt`. */
export function wave(length: number, salt: number): Float32Array {
  return Float32Array.from({ length }, (_, i) => Math.cos(i * 0.77 + salt * 1.3));
}

export function qkv(seq: number, dim: number): { q: Float32Array; k: Float32Array; v: Float32Array } {
  return { q: wave(seq * dim, 1), k: wave(seq * dim, 2), v: wave(seq * dim, 3) };
}

function dot(a: Float32Array, i: number, b: Float32Array, j: number, dim: number): number {
  let sum = 0;
  for (let d = 0; d < dim; d++) sum += a[i * dim + d] * b[j * dim + d];
  return sum;
}

/** softmax(q kᵀ / sqrt(dim)) v for every query row; causal rows see keys up to their own position. */
export function referenceAttention(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  seq: number,
  dim: number,
  causal: boolean,
): Float32Array {
  const out = new Float32Array(seq * dim);
  const scale = 1 / Math.sqrt(dim);
  for (let i = 0; i < seq; i++) {
    const keys = causal ? i + 1 : seq;
    const scores = Array.from({ length: keys }, (_, j) => dot(q, i, k, j, dim) * scale);
    const max = Math.max(...scores);
    const weights = scores.map((s) => Math.exp(s - max));
    const total = weights.reduce((a, b) => a + b, 0);
    for (let d = 0; d < dim; d++) {
      let sum = 0;
      for (let j = 0; j < keys; j++) sum += weights[j] * v[j * dim + d];
      out[i * dim + d] = sum / total;
    }
  }
  return out;
}

/** Per query row of a block: the running max score, the running sum of exp(score - max), and the weighted V sum. */
export class OnlineSoftmax {
  readonly #max: Float64Array;
  readonly #sum: Float64Array;
  readonly #acc: Float64Array;

  constructor(
    readonly q: Float32Array,
    readonly rows: number,
    readonly dim: number,
  ) {
    this.#max = new Float64Array(rows).fill(Number.NEGATIVE_INFINITY);
    this.#sum = new Float64Array(rows);
    this.#acc = new Float64Array(rows * dim);
  }

  /**
   * Folds in a block of `keys` K/V rows. Positions are global sequence
   * indices, used by the causal mask (a key after the query is skipped).
   */
  attend(
    k: Float32Array,
    v: Float32Array,
    keys: number,
    qStart: number,
    kStart: number,
    causal: boolean,
  ): void {
    const { dim } = this;
    const scale = 1 / Math.sqrt(dim);
    for (let i = 0; i < this.rows; i++) {
      for (let j = 0; j < keys; j++) {
        if (causal && kStart + j > qStart + i) break;
        const score = dot(this.q, i, k, j, dim) * scale;
        const max = Math.max(this.#max[i], score);
        // Rescale what was summed under the old max, then add this key's weight.
        const rescale = Math.exp(this.#max[i] - max);
        const weight = Math.exp(score - max);
        this.#sum[i] = this.#sum[i] * rescale + weight;
        for (let d = 0; d < dim; d++) {
          this.#acc[i * dim + d] = this.#acc[i * dim + d] * rescale + weight * v[j * dim + d];
        }
        this.#max[i] = max;
      }
    }
  }

  /** The attention output of the block's rows. */
  result(): Float32Array {
    return Float32Array.from(this.#acc, (a, index) => a / this.#sum[Math.floor(index / this.dim)]);
  }
}
