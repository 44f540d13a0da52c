/**
 * Rank entry of the weight-sync bench: world of 4, trainers 0 and 1 hold the
 * source weights, rollouts 2 and 3 a model of the same layout to load into.
 * Each mode is timed from a barrier to a barrier on all ranks, so a figure is
 * the time until every rollout holds the new weights.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { median } from '../src/cli/bench/median.ts';
import { type DType, type RankContext, Tensor, WeightSyncEngine } from '../src/index.ts';

export interface ModelSpec {
  layers: number;
  hidden: number;
  experts: number;
  expertHidden: number;
}

export type SyncMode = 'naive' | 'engine S=1' | 'engine S=2' | 'engine S=2 owned' | 'copy floor';
export const SYNC_MODES: readonly SyncMode[] = [
  'naive',
  'engine S=1',
  'engine S=2',
  'engine S=2 owned',
  'copy floor',
];

export interface RankArgs {
  model: ModelSpec;
  bucketBytes: number;
  reps: number;
}

export interface ModeSample {
  mode: SyncMode;
  /** Per sync, median over reps (after one warm-up sync). */
  ms: number;
  /** Every rollout's weights equal the trainers' after the last sync (the floor: its own source's). */
  exact: boolean;
}

export interface RankResult {
  tensors: number;
  bytes: number;
  samples: ModeSample[];
}

/**
 * An MoE-style transformer: per layer attention (bfloat16), layer norms
 * (float32), an odd-sized bias, a router and many small experts, the shape
 * of model where per-tensor overheads add up.
 */
export function modelLayout(spec: ModelSpec): Array<[string, DType, number[]]> {
  const { hidden: h, experts, expertHidden: f } = spec;
  const layout: Array<[string, DType, number[]]> = [['embed.tokens', 'bfloat16', [8 * h, h]]];
  for (let l = 0; l < spec.layers; l++) {
    const p = `layers.${l}`;
    layout.push(
      [`${p}.attn.qkv.bias`, 'bfloat16', [3 * h + 1]],
      [`${p}.attn.qkv.weight`, 'bfloat16', [3 * h, h]],
      [`${p}.attn.out.weight`, 'bfloat16', [h, h]],
      [`${p}.norm1.weight`, 'float32', [h]],
      [`${p}.norm2.weight`, 'float32', [h]],
      [`${p}.router.weight`, 'float32', [experts, h]],
      [`${p}.router.steps`, 'int64', [1]],
    );
    for (let e = 0; e < experts; e++) {
      layout.push(
        [`${p}.experts.${e}.up`, 'bfloat16', [f, h]],
        [`${p}.experts.${e}.down`, 'bfloat16', [h, f]],
      );
    }
  }
  return layout;
}

/** Distinct bytes per tensor and per seed; the values' meaning does not matter. */
const fillByte = (seed: number, i: number) => (seed * 31 + i) & 0xff;

function build(spec: ModelSpec, seed: number): Array<[string, Tensor]> {
  return modelLayout(spec).map(([name, dtype, shape], i) => {
    const t = Tensor.empty(shape, dtype);
    t.bytes().fill(fillByte(seed, i));
    return [name, t];
  });
}

/** Whether `got` holds the model `build(spec, seed)` makes, checked without building a second one. */
function holds(got: Array<[string, Tensor]>, spec: ModelSpec, seed: number): boolean {
  const layout = modelLayout(spec);
  return got.every(([name, t], i) => {
    const [wantName, dtype, shape] = layout[i];
    if (name !== wantName || t.dtype !== dtype || t.shape.join() !== shape.join()) return false;
    return filledWith(t.bytes(), fillByte(seed, i));
  });
}

/** Whether every byte of `bytes` is `value` (compared a MiB at a time). */
export function filledWith(bytes: Uint8Array, value: number): boolean {
  const chunk = Buffer.alloc(Math.min(bytes.length, 1 << 20), value);
  for (let at = 0; at < bytes.length; at += chunk.length) {
    const part = bytes.subarray(at, at + chunk.length);
    if (Buffer.compare(part, chunk.subarray(0, part.length)) !== 0) return false;
  }
  return true;
}

// The owned mode leaves a model's worth of garbage per sync: collected between its syncs, outside the
// timing, so the bench's memory stays bounded (it ran out once the 4 processes started beside the threads'
// garbage). Only there: a full collection gives pages back that the next sync must fault in again.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

export default async function main(ctx: RankContext, args: RankArgs): Promise<RankResult> {
  const isTrainer = ctx.rank < 2;
  const source = build(args.model, isTrainer ? 1 : 0);
  const target = isTrainer ? [] : build(args.model, 0);
  // What the owned mode keeps, apart from `target`, so the other modes always load into the same tensors.
  const kept: Array<[string, Tensor]> = [];
  const naiveGroup = await ctx.newGroup([0, 2, 3]);
  const { bucketBytes } = args;
  // Rank 1 takes no part in the naive broadcast and the S=1 engine: it only joins the barriers.
  const single =
    ctx.rank === 1
      ? undefined
      : new WeightSyncEngine(ctx.world, { senders: [0], receivers: [2, 3], bucketBytes, tag: 100 });
  const striped = new WeightSyncEngine(ctx.world, {
    senders: [0, 1],
    receivers: [2, 3],
    bucketBytes,
    tag: 200,
  });

  async function syncOnce(mode: SyncMode): Promise<void> {
    if (mode === 'copy floor') {
      // The memory traffic of loading a model with no messages at all: each rollout copies a model's
      // worth between tensors of its own, both at once. No way of syncing into `target` costs less.
      if (!isTrainer) for (const [i, [, t]] of target.entries()) t.copy_(source[i][1]);
      return;
    }
    if (mode === 'naive') {
      if (ctx.rank === 1) return;
      const tensors = isTrainer ? source : target;
      for (const [, t] of tensors) await naiveGroup.broadcast(t, { src: 0 });
      return;
    }
    const engine = mode === 'engine S=1' ? single : striped;
    if (!engine) return;
    if (engine.role === 'sender') {
      await engine.send(source);
      return;
    }
    const borrow = mode !== 'engine S=2 owned';
    let i = 0;
    for await (const [, t] of engine.receive({ borrow })) {
      // Borrowed views are loaded into the model at once; owned tensors are simply kept, as a caller would.
      if (borrow) target[i][1].copy_(t);
      else kept[i] = [target[i][0], t];
      i++;
    }
  }

  // One mode after the other, the naive baseline first: each mode's code runs as it would alone until the
  // next mode starts (taking turns rep by rep made the baseline ~1.4× slower here, as the modes' shared code
  // paths stopped being specialised to one of them, and that would flatter the engine).
  const samples: ModeSample[] = [];
  for (const mode of SYNC_MODES) {
    const times: number[] = [];
    for (let rep = 0; rep <= args.reps; rep++) {
      if (!isTrainer) for (const [, t] of target) t.bytes()[0] ^= 0xff; // a stale byte the sync must overwrite
      if (mode === 'engine S=2 owned') collectGarbage();
      await ctx.world.barrier();
      const started = performance.now();
      await syncOnce(mode);
      await ctx.world.barrier();
      if (rep > 0) times.push(performance.now() - started);
    }
    // The floor copies the rollout's own model (seed 0); every sync delivers the trainers' (seed 1).
    const loaded = mode === 'engine S=2 owned' ? kept : target;
    const exact = isTrainer || holds(loaded, args.model, mode === 'copy floor' ? 0 : 1);
    samples.push({ mode, ms: median(times), exact });
  }
  return { tensors: source.length, bytes: source.reduce((n, [, t]) => n + t.nbytes, 0), samples };
}
