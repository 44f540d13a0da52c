/**
 * Placements: how a global tensor lies along one mesh dimension. Shard(dim)
 * splits tensor dim `dim` across the mesh dimension (torch.chunk semantics),
 * Replicate() gives every coordinate the whole value, Partial(op) gives every
 * coordinate a term that `op` reduces to the value. Placements are plain
 * frozen objects, so they survive structured clone (sendObject) unchanged.
 */
import type { DType } from '../tensor/dtype.ts';
import { assertReduceOp, isReduceOp, REDUCE_OPS, type ReduceOp } from '../tensor/reduce-ops.ts';
import { describeValue } from '../tensor/validate.ts';

// The types carry a Placement suffix so that importing `Partial` never hides TypeScript's Partial<T>.
export interface ShardPlacement {
  readonly kind: 'shard';
  readonly dim: number;
}
export interface ReplicatePlacement {
  readonly kind: 'replicate';
}
export interface PartialPlacement {
  readonly kind: 'partial';
  readonly op: ReduceOp;
}
export type Placement = ShardPlacement | ReplicatePlacement | PartialPlacement;

export function Shard(dim: number): ShardPlacement {
  if (!Number.isSafeInteger(dim)) throw new TypeError(`Shard: dim must be an integer, got ${String(dim)}`);
  return Object.freeze({ kind: 'shard', dim });
}

export function Replicate(): ReplicatePlacement {
  return REPLICATE;
}

export function Partial(op: ReduceOp = 'sum'): PartialPlacement {
  if (!isReduceOp(op)) {
    throw new TypeError(`Partial: unknown reduce op ${String(op)}; expected one of ${REDUCE_OPS.join(', ')}`);
  }
  return Object.freeze({ kind: 'partial', op });
}

const REPLICATE: ReplicatePlacement = Object.freeze({ kind: 'replicate' });

/** e.g. 'Shard(0)', 'Replicate()', 'Partial(sum)'. */
export function formatPlacement(p: Placement): string {
  return p.kind === 'shard' ? `Shard(${p.dim})` : p.kind === 'partial' ? `Partial(${p.op})` : 'Replicate()';
}

export function formatPlacements(placements: readonly Placement[]): string {
  return `[${placements.map(formatPlacement).join(', ')}]`;
}

export function samePlacement(a: Placement, b: Placement): boolean {
  return formatPlacement(a) === formatPlacement(b);
}

/**
 * Checks one placement per mesh dimension for a tensor of `ndim` dims and
 * `dtype`, and returns them with Shard dims made non-negative. Partials on
 * different mesh dims must share one op: a mix has no single meaning.
 */
export function normalizePlacements(
  placements: unknown,
  meshNdim: number,
  ndim: number,
  dtype: DType,
  where: string,
): Placement[] {
  if (!Array.isArray(placements) || placements.length !== meshNdim) {
    throw new TypeError(`${where}: placements must be an array of ${meshNdim} (one per mesh dimension)`);
  }
  const out = placements.map((p: unknown, m): Placement => {
    const what = `${where}: placements[${m}]`;
    const kind = (p as { kind?: unknown } | null)?.kind;
    if (kind === 'replicate') return REPLICATE;
    if (kind === 'partial') return Partial(assertReduceOp((p as PartialPlacement).op, dtype, what));
    if (kind === 'shard') {
      const dim = (p as ShardPlacement).dim;
      if (!Number.isInteger(dim) || dim < -ndim || dim >= ndim) {
        throw new RangeError(`${what} Shard(${String(dim)}) is out of range for a ${ndim}-d tensor`);
      }
      return Shard(dim < 0 ? dim + ndim : dim);
    }
    throw new TypeError(`${what} must be Shard(dim), Replicate() or Partial(op), got ${describeValue(p)}`);
  });
  const ops = new Set(out.flatMap((p) => (p.kind === 'partial' ? [p.op] : [])));
  if (ops.size > 1) {
    throw new TypeError(
      `${where}: placements ${formatPlacements(out)} mix Partial ops; reduce one of them first`,
    );
  }
  return out;
}
