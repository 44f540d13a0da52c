/** The one strided copy kernel behind copy_, contiguous, clone, cat, fill_ and fromArray. */
import type { Raw } from './convert.ts';
import { checkInterrupt, INTERRUPT_CHUNK_ELEMENTS } from './interrupt.ts';

/** The part of every TypedArray the kernel uses, with elements widened to number | bigint. */
export interface RawArray {
  [index: number]: Raw;
  readonly length: number;
  set(source: ArrayLike<Raw>, offset?: number): void;
  subarray(begin?: number, end?: number): RawArray;
  fill(value: Raw, start?: number, end?: number): unknown;
}

/** Square blocks for element-wise loops, so a transposing copy reuses each cache line it touches. */
const TILE = 64;

/**
 * Copies `shape` elements from `src` to `dst` (index 0 of each is element
 * [0,...,0]; strides in elements, a 0 stride repeats one source element).
 * `cast` converts each element; null means a plain typed-array store (or
 * `set`) already converts correctly. Dims that are contiguous in both layouts
 * are merged first, so a contiguous copy is a single `set` and a row-strided
 * one a `set` per row.
 */
export function copyStrided(
  shape: readonly number[],
  dst: RawArray,
  dstStrides: readonly number[],
  src: RawArray,
  srcStrides: readonly number[],
  cast: ((raw: Raw) => Raw) | null,
): void {
  if (shape.includes(0)) return;
  const { sizes, a: ds, b: ss } = coalesce(shape, dstStrides, srcStrides);
  // The two innermost dims form a plane copied per step of the outer dims.
  const outer = sizes.length - 2;
  const [rows, cols] = [sizes[outer], sizes[outer + 1]];
  const [dRow, dCol, sRow, sCol] = [ds[outer], ds[outer + 1], ss[outer], ss[outer + 1]];
  const byRuns = dCol === 1 && (sCol === 0 || (sCol === 1 && cast === null));
  const counter = new Array<number>(outer).fill(0);
  // Elements left before the next interrupt check, so a copy over gigabytes can be stopped by an abort.
  let budget = INTERRUPT_CHUNK_ELEMENTS;
  const spend = (elements: number): void => {
    budget -= elements;
    if (budget > 0) return;
    budget = INTERRUPT_CHUNK_ELEMENTS;
    checkInterrupt();
  };
  let dOff = 0;
  let sOff = 0;
  for (;;) {
    if (byRuns) {
      for (let i = 0, d = dOff, s = sOff; i < rows; i++, d += dRow, s += sRow) {
        const value = sCol === 0 ? (cast === null ? src[s] : cast(src[s])) : 0;
        for (let c = 0; c < cols; c += INTERRUPT_CHUNK_ELEMENTS) {
          const end = Math.min(cols, c + INTERRUPT_CHUNK_ELEMENTS);
          if (sCol === 0) dst.fill(value, d + c, d + end);
          else dst.set(src.subarray(s + c, s + end), d + c);
          spend(end - c);
        }
      }
    } else {
      for (let i0 = 0; i0 < rows; i0 += TILE) {
        const i1 = Math.min(rows, i0 + TILE);
        for (let j0 = 0; j0 < cols; j0 += TILE) {
          const j1 = Math.min(cols, j0 + TILE);
          for (let i = i0; i < i1; i++) {
            let d = dOff + i * dRow + j0 * dCol;
            let s = sOff + i * sRow + j0 * sCol;
            if (cast === null) for (let j = j0; j < j1; j++, d += dCol, s += sCol) dst[d] = src[s];
            else for (let j = j0; j < j1; j++, d += dCol, s += sCol) dst[d] = cast(src[s]);
          }
          spend((i1 - i0) * (j1 - j0));
        }
      }
    }
    let k = outer - 1;
    for (; k >= 0; k--) {
      if (++counter[k] < sizes[k]) {
        dOff += ds[k];
        sOff += ss[k];
        break;
      }
      counter[k] = 0;
      dOff -= (sizes[k] - 1) * ds[k];
      sOff -= (sizes[k] - 1) * ss[k];
    }
    if (k < 0) return;
  }
}

/** Drops size-1 dims and merges neighbours contiguous in both layouts; pads to at least two dims. */
function coalesce(
  shape: readonly number[],
  a: readonly number[],
  b: readonly number[],
): { sizes: number[]; a: number[]; b: number[] } {
  const sizes: number[] = [];
  const sa: number[] = [];
  const sb: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] === 1) continue;
    const k = sizes.length - 1;
    if (k >= 0 && a[d] === sa[k] * sizes[k] && b[d] === sb[k] * sizes[k]) {
      sizes[k] *= shape[d];
    } else {
      sizes.push(shape[d]);
      sa.push(a[d]);
      sb.push(b[d]);
    }
  }
  // The stride of a size-1 dim is never multiplied by anything but 0.
  while (sizes.length < 2) {
    sizes.push(1);
    sa.push(1);
    sb.push(1);
  }
  return { sizes: sizes.reverse(), a: sa.reverse(), b: sb.reverse() };
}
