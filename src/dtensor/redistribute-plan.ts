/**
 * The order of one-mesh-dimension transitions that takes a DTensor from one
 * list of placements to another. Pure: every rank computes the same plan.
 *
 * A step on mesh dim m that moves tensor dim d (gather, slice, all-to-all) is
 * only a plain collective along m when no later mesh dim also shards d: with
 * nested sharding, the later dim's pieces sit inside m's. Such a later dim is
 * first gathered back to Replicate, and re-sharded when its own turn comes.
 */
import { formatPlacement, type Placement, Replicate, samePlacement } from './placement.ts';

export interface Transition {
  meshDim: number;
  from: Placement;
  to: Placement;
  /** The placements once this step is done. */
  after: readonly Placement[];
}

export function planRedistribute(
  current: readonly Placement[],
  target: readonly Placement[],
  where: string,
): Transition[] {
  target.forEach((to, m) => {
    const from = current[m];
    if (from.kind === 'shard' && to.kind === 'partial') {
      throw new TypeError(
        `${where}: mesh dim ${m} cannot go from ${formatPlacement(from)} to ${formatPlacement(to)} ` +
          '(a shard is not a partial term); redistribute to Replicate() first if that is meant',
      );
    }
  });
  const state = [...current];
  const steps: Transition[] = [];
  const move = (meshDim: number, to: Placement) => {
    const from = state[meshDim];
    state[meshDim] = to;
    steps.push({ meshDim, from, to, after: [...state] });
  };
  // Dims before m already hold their target and are never touched again, so this ends.
  for (let m = 0; m < state.length; m++) {
    while (!samePlacement(state[m], target[m])) {
      const blocker = lastShardOf(state, m, movedDims(state[m], target[m]));
      if (blocker >= 0) move(blocker, Replicate());
      // Partial(a) to Partial(b): reduce with a, then split with b.
      else if (state[m].kind === 'partial' && target[m].kind === 'partial') move(m, Replicate());
      else move(m, target[m]);
    }
  }
  return steps;
}

/** Tensor dims whose layout a from → to step changes. */
function movedDims(from: Placement, to: Placement): number[] {
  return [from, to].flatMap((p) => (p.kind === 'shard' ? [p.dim] : []));
}

/** The last mesh dim after `m` that shards one of `dims`, or -1. Nothing after it shards its dim. */
function lastShardOf(state: readonly Placement[], m: number, dims: readonly number[]): number {
  for (let j = state.length - 1; j > m; j--) {
    const p = state[j];
    if (p.kind === 'shard' && dims.includes(p.dim)) return j;
  }
  return -1;
}
