/**
 * One tensor-parallel rank: W1 split by columns and W2 by rows over a 1-d
 * mesh (Megatron), b2 and the batch replicated. The row-parallel output and
 * the input gradient are Partial sums; turning them Replicate is the block's
 * one allReduce forward and one backward.
 */
import {
  DeviceMesh,
  DTensor,
  distributeTensor,
  Partial,
  type Placement,
  type RankContext,
  Replicate,
  Shard,
  Tensor,
} from 'tensorcomm';
import { GPU_FLOPS_PER_US } from '../predicted-runs.ts';
import { initialParams, type Sizes, sgdStep, syntheticBatch } from './mlp.ts';

export interface TrainArgs extends Sizes {
  steps: number;
  lr: number;
}

export interface RankResult {
  hidden: number;
  losses: number[];
  dx: number[];
  /** The full trained parameters, gathered from the shards. */
  params: Record<'w1' | 'b1' | 'w2' | 'b2', number[]>;
}

export default async function main(ctx: RankContext, args: TrainArgs): Promise<RankResult> {
  const mesh = new DeviceMesh(ctx.world, [ctx.worldSize]);
  const { input: i, hidden: h, output: o } = args;
  // Every rank builds the same start; distributeTensor takes rank 0's and keeps this rank's part.
  const init = initialParams(args);
  const data = syntheticBatch(args);
  const spread = (values: Float32Array, shape: number[], placement: Placement = Replicate()) =>
    distributeTensor(Tensor.fromArray(values, shape), mesh, [placement]);
  const w1 = await spread(init.w1, [i, h], Shard(1));
  const b1 = await spread(init.b1, [h], Shard(0));
  const w2 = await spread(init.w2, [h, o], Shard(0));
  const b2 = await spread(init.b2, [o]);
  const x = await spread(data.x, [args.batch, i]);
  const y = await spread(data.y, [args.batch, o]);

  // SGD updates the local shards in place; the DTensors above see the new values.
  const local = (d: DTensor) => d.toLocal().data as Float32Array;
  const params = { w1: local(w1), b1: local(b1), w2: local(w2), b2: local(b2) };
  const batch = { x: local(x), y: local(y) };
  const hidden = w1.toLocal().shape[1];
  const allReduce = async (partial: Float32Array, shape: [number, number]) => {
    const sum = await DTensor.fromLocal(Tensor.fromArray(partial, shape), mesh, [Partial('sum')]).full();
    return sum.data as Float32Array;
  };

  const losses: number[] = [];
  let dx: Float32Array = new Float32Array(0);
  // A step's matmuls on this rank's hidden units: forward x·W1 and a·W2, backward twice each.
  const stepFlops = 6 * args.batch * hidden * (i + o);
  for (let step = 0; step < args.steps; step++) {
    ctx.predict?.compute(stepFlops / GPU_FLOPS_PER_US);
    const result = await sgdStep(params, batch, { ...args, hidden }, allReduce);
    losses.push(result.loss);
    dx = result.dx;
  }
  const gathered = async (d: DTensor) => (await d.full()).toArray();
  return {
    hidden,
    losses,
    dx: Array.from(dx),
    params: {
      w1: await gathered(w1),
      b1: await gathered(b1),
      w2: await gathered(w2),
      b2: await gathered(b2),
    },
  };
}
