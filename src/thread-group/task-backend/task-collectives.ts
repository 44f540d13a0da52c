/**
 * What the last member of a collective does for all, given every member's
 * arguments in group-rank order (meeting.ts): torch's semantics, with every
 * reduction in group-rank order, as the store backend's small calls reduce
 * (same bits on every rank). Values that only their sender sized (object
 * collectives) are handed out as copies each receiver owns.
 */
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { isPremulSum, type Reduction } from '../reduction.ts';
import { splitRows } from '../store-backend/all-to-all.ts';
import { premultiplied } from '../store-backend/premul-sum.ts';
import { copyElements, reduceInto, slicesLike } from '../store-backend/slices.ts';
import type { Complete } from './meeting.ts';

/** Each member's inputs as the reduction sees them (premulSum: scaled by the member's own factor), and the op. */
function reduced(inputs: readonly Tensor[], ops: readonly Reduction[]): Tensor {
  const first = ops[0];
  const op: ReduceOp = isPremulSum(first) ? 'sum' : first;
  const operands = inputs.map((t, p) => {
    const own = ops[p];
    return isPremulSum(own) ? premultiplied(t, own.factor) : t;
  });
  const out = Tensor.empty(inputs[0].shape, inputs[0].dtype);
  reduceInto(op, out, operands);
  return out;
}

export const allReduce: Complete<{ tensor: Tensor; op: Reduction }, void> = (members) => {
  const sum = reduced(
    members.map((m) => m.args.tensor),
    members.map((m) => m.args.op),
  );
  for (const m of members) copyElements(m.args.tensor, 0, sum);
  return undefined;
};

export const broadcast: Complete<{ tensor: Tensor; src: number }, void> = (members) => {
  const source = members[members[0].args.src].args.tensor;
  for (const m of members) if (m.args.tensor !== source) copyElements(m.args.tensor, 0, source);
  return undefined;
};

export const reduce: Complete<{ tensor: Tensor; dst: number; op: Reduction }, void> = (members) => {
  const result = reduced(
    members.map((m) => m.args.tensor),
    members.map((m) => m.args.op),
  );
  copyElements(members[members[0].args.dst].args.tensor, 0, result);
  return undefined;
};

export const allGather: Complete<{ outputs: readonly Tensor[]; input: Tensor }, void> = (members) => {
  for (const m of members)
    members.forEach((p, i) => {
      copyElements(m.args.outputs[i], 0, p.args.input);
    });
  return undefined;
};

export const allGatherInto: Complete<{ output: Tensor; input: Tensor }, void> = (members) => {
  for (const m of members) {
    members.forEach((p, i) => {
      copyElements(m.args.output, i * p.args.input.numel, p.args.input);
    });
  }
  return undefined;
};

/** `inputs[r]` of every member reduces into member r's output. */
export const reduceScatter: Complete<{ output: Tensor; inputs: readonly Tensor[]; op: Reduction }, void> = (
  members,
) => {
  const ops = members.map((m) => m.args.op);
  members.forEach((m, r) => {
    copyElements(
      m.args.output,
      0,
      reduced(
        members.map((p) => p.args.inputs[r]),
        ops,
      ),
    );
  });
  return undefined;
};

/** reduceScatter of each member's input cut into slices of the output's shape. */
export function scatterSlices(
  output: Tensor,
  input: Tensor,
  size: number,
): { output: Tensor; inputs: readonly Tensor[] } {
  return { output, inputs: slicesLike(input, output, size) };
}

/** Member r's output i comes from member i's input r. */
export const allToAll: Complete<{ outputs: readonly Tensor[]; inputs: readonly Tensor[] }, void> = (
  members,
) => {
  members.forEach((m, r) => {
    members.forEach((p, i) => {
      copyElements(m.args.outputs[i], 0, p.args.inputs[r]);
    });
  });
  return undefined;
};

/** allToAllSingle's tensors cut by their splits into allToAll's lists. */
export function splitLists(
  output: Tensor,
  input: Tensor,
  outputSplits: readonly number[],
  inputSplits: readonly number[],
): { outputs: readonly Tensor[]; inputs: readonly Tensor[] } {
  return { outputs: splitRows(output, outputSplits), inputs: splitRows(input, inputSplits) };
}

export const gather: Complete<{ tensor: Tensor; dst: number; list: readonly Tensor[] | undefined }, void> = (
  members,
) => {
  const list = members[members[0].args.dst].args.list;
  if (list)
    members.forEach((m, i) => {
      copyElements(list[i], 0, m.args.tensor);
    });
  return undefined;
};

export const scatter: Complete<{ tensor: Tensor; src: number; list: readonly Tensor[] | undefined }, void> = (
  members,
) => {
  const list = members[members[0].args.src].args.list;
  if (list)
    members.forEach((m, i) => {
      copyElements(m.args.tensor, 0, list[i]);
    });
  return undefined;
};

export const barrier: Complete<null, void> = () => undefined;

/** A member's own value stays its own; every other member gets a copy. */
const own = (value: Tensor, mine: Tensor) => (value === mine ? value : value.clone());

export const broadcastAny: Complete<{ tensor: Tensor | undefined; src: number }, Tensor> = (members) => {
  const source = members[members[0].args.src].args.tensor as Tensor;
  return members.map((m) => own(source, m.args.tensor as Tensor));
};

export const allGatherAny: Complete<Tensor, Tensor[]> = (members) =>
  members.map((m) => members.map((p) => own(p.args, m.args)));

export const gatherAny: Complete<{ tensor: Tensor; dst: number }, Tensor[] | undefined> = (members) => {
  const dst = members[0].args.dst;
  const mine = members[dst].args.tensor;
  return members.map((_, r) => (r === dst ? members.map((p) => own(p.args.tensor, mine)) : undefined));
};

export const scatterAny: Complete<{ tensors: readonly Tensor[] | undefined; src: number }, Tensor> = (
  members,
) => {
  const src = members[0].args.src;
  const values = members[src].args.tensors as readonly Tensor[];
  return members.map((_, r) => own(values[r], values[src]));
};
