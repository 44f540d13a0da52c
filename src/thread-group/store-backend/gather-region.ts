/**
 * broadcast, allGather, reduceScatter, gather and scatter of small host
 * tensors in the group's shared region (region-call.ts): what a rank
 * contributes goes into its record, and once the last arrival has judged
 * the call every rank takes its part straight from its peers' records (a
 * reduceScatter reduces its own slice of every record, in rank order). One
 * copy in, one copy out and one wake-up, where the keyed store costs a
 * handshake between every two ranks: between 2 thread ranks a 4 KiB
 * broadcast took 16-26 µs through the keyed store, and an allReduce of the
 * same size here 2.6. Each call's steps, for meetInRegion.
 */
import { itemSize } from '../../tensor/dtype.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CallRegion } from './call-region.ts';
import type { RegionSteps } from './region-call.ts';
import { copyElements, elements } from './slices.ts';

export const broadcastSteps: RegionSteps<Tensor, number> = {
  bring(region, slot, tensor, src) {
    if (region.rank === src) region.copyIn(slot, tensor, 0, tensor.nbytes);
  },
  take(region, slot, _call, tensor, src) {
    if (region.rank !== src) region.take(slot, src, 0, tensor.bytes());
  },
};

/** Every rank's input, in rank order, into `into(p)`. */
function takeEach(region: CallRegion, slot: number, input: Tensor, into: (p: number) => Tensor): void {
  for (let p = 0; p < region.size; p++) {
    if (p === region.rank) copyElements(into(p), 0, input);
    else region.take(slot, p, 0, into(p).bytes());
  }
}

const bringInput = (region: CallRegion, slot: number, input: Tensor) =>
  region.copyIn(slot, input, 0, input.nbytes);

export const allGatherSteps: RegionSteps<readonly Tensor[], Tensor> = {
  bring: (region, slot, _outputs, input) => bringInput(region, slot, input),
  take: (region, slot, _call, outputs, input) => takeEach(region, slot, input, (p) => outputs[p]),
};

export const allGatherIntoSteps: RegionSteps<Tensor, Tensor> = {
  bring: (region, slot, _output, input) => bringInput(region, slot, input),
  take(region, slot, _call, output, input) {
    const n = input.numel;
    takeEach(region, slot, input, (p) => elements(output, p * n, (p + 1) * n));
  },
};

/**
 * A reduceScatter's input and op: its shares in group rank order (inputs[p] is this rank's share of
 * rank p's output), or reduceScatterTensor's whole input, one output's worth per rank.
 */
export interface Shares {
  inputs: readonly Tensor[] | Tensor;
  op: ReduceOp;
}

export const reduceScatterSteps: RegionSteps<Tensor, Shares> = {
  bring(region, slot, _output, { inputs }) {
    if (!Array.isArray(inputs)) return bringInput(region, slot, inputs as Tensor);
    let at = 0;
    for (const share of inputs) {
      region.bring(slot, at, share.bytes());
      at += share.nbytes;
    }
  },
  // This rank's slice of every record, reduced in rank order: past the shares of the ranks before it
  // (one output's worth each in the tensor form).
  take(region, slot, _call, output, { inputs, op }) {
    let at = 0;
    for (let p = 0; p < region.rank; p++) at += Array.isArray(inputs) ? inputs[p].nbytes : output.nbytes;
    region.reduceRecords(slot, op, output.dtype, output.data, at / itemSize(output.dtype));
  },
};

/** A gather's or scatter's root and its list (the root's alone). */
export interface Rooted {
  root: number;
  list: readonly Tensor[] | undefined;
}

export const gatherSteps: RegionSteps<Tensor, Rooted> = {
  bring: (region, slot, tensor) => bringInput(region, slot, tensor),
  take(region, slot, _call, tensor, { root, list }) {
    if (region.rank === root) takeEach(region, slot, tensor, (p) => (list as readonly Tensor[])[p]);
  },
};

export const scatterSteps: RegionSteps<Tensor, Rooted> = {
  bring(region, slot, tensor, { root, list }) {
    if (region.rank !== root) return;
    for (let p = 0; p < region.size; p++)
      region.bring(slot, p * tensor.nbytes, (list as readonly Tensor[])[p].bytes());
  },
  take(region, slot, _call, tensor, { root }) {
    region.take(slot, root, region.rank * tensor.nbytes, tensor.bytes());
  },
};
