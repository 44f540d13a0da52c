/**
 * The checks of ThreadGroup's arguments that need the group (its size, this
 * rank's place in it, its name): ranks and roots, one-tensor-per-rank lists,
 * splits, and the group-free ones beside them (tags, dtypes). Each throws the
 * RangeError or TypeError its call rejects with, naming the call.
 */
import type { Tensor } from '../tensor/tensor.ts';
import { assertCommTensor } from '../tensor/validate.ts';

/** What the checks read of a group (a ThreadGroup is one). */
export interface CheckedGroup {
  readonly rank: number;
  readonly size: number;
  readonly name: string;
}

export function checkGroupRank(group: CheckedGroup, value: unknown, what: string, where: string): number {
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) >= group.size) {
    throw new RangeError(
      `${where}: ${what} ${String(value)} is not a rank of group "${group.name}" (size ${group.size})`,
    );
  }
  return value as number;
}

/** The other end of a point-to-point call: a group rank, not this rank's own. */
export function checkPeer(group: CheckedGroup, value: unknown, what: string, where: string): number {
  const peer = checkGroupRank(group, value, what, where);
  if (peer === group.rank) throw new RangeError(`${where}: ${what} ${peer} is this rank itself`);
  return peer;
}

/** One tensor per group rank, each like `like` where given. */
export function checkTensorList(
  group: CheckedGroup,
  list: unknown,
  where: string,
  what: string,
  like?: Tensor,
): Tensor[] {
  if (!Array.isArray(list) || list.length !== group.size) {
    throw new RangeError(`${where}: ${what} must be an array of ${group.size} tensors (one per group rank)`);
  }
  list.forEach((t, i) => {
    assertCommTensor(t, `${where}: ${what}[${i}]`);
    if (like && t.describe() !== like.describe()) {
      throw new TypeError(`${where}: ${what}[${i}] is ${t.describe()}, expected ${like.describe()}`);
    }
  });
  return list;
}

/** Checks that `whole` holds one `part` per group rank (the flat-tensor gather/scatter calls). */
export function checkWhole(
  group: CheckedGroup,
  where: string,
  whole: { name: string; tensor: Tensor },
  part: { name: string; tensor: Tensor },
): void {
  assertCommTensor(whole.tensor, `${where}: ${whole.name}`);
  assertCommTensor(part.tensor, `${where}: ${part.name}`);
  sameDType(whole.tensor, part.tensor, where);
  const expected = part.tensor.numel * group.size;
  if (whole.tensor.numel !== expected) {
    throw new RangeError(
      `${where}: ${whole.name} ${whole.tensor.describe()} must hold ${group.size} × ${part.tensor.describe()} (${expected} elements)`,
    );
  }
}

/** A reduceScatter's tensors: `inputs[p]` is this rank's share of rank p's output, so `inputs[rank]` is like `output`. */
export function checkReduceScatter(group: CheckedGroup, output: Tensor, inputs: unknown): void {
  assertCommTensor(output, 'reduceScatter: output');
  const shares = checkTensorList(group, inputs, 'reduceScatter', 'inputs');
  for (const t of shares) sameDType(output, t, 'reduceScatter');
  if (shares[group.rank].describe() !== output.describe()) {
    throw new TypeError(
      `reduceScatter: inputs[${group.rank}] is ${shares[group.rank].describe()}, but output is ${output.describe()}`,
    );
  }
}

/** An allToAll's lists: one tensor per rank each, of one dtype; what this rank sends itself fits where it lands. */
export function checkAllToAll(group: CheckedGroup, outputs: unknown, inputs: unknown): void {
  const to = checkTensorList(group, outputs, 'allToAll', 'outputs');
  const from = checkTensorList(group, inputs, 'allToAll', 'inputs');
  for (const t of [...to, ...from]) sameDType(from[0], t, 'allToAll');
  if (from[group.rank].describe() !== to[group.rank].describe()) {
    throw new TypeError(
      `allToAll: inputs[${group.rank}] is ${from[group.rank].describe()} but outputs[${group.rank}] is ${to[group.rank].describe()}`,
    );
  }
}

/**
 * allToAllSingle's tensors: one dtype, split along dim 0 and alike beyond
 * it. Returns the dims beyond 0 (`4,8`), which every rank's signature shows.
 */
export function checkRowsAlike(output: Tensor, input: Tensor): string {
  assertCommTensor(output, 'allToAllSingle: output');
  assertCommTensor(input, 'allToAllSingle: input');
  sameDType(output, input, 'allToAllSingle');
  if (input.shape.length === 0 || output.shape.length === 0) {
    throw new TypeError('allToAllSingle: input and output need at least one dimension (split along dim 0)');
  }
  const rest = input.shape.slice(1).join(',');
  if (output.shape.slice(1).join(',') !== rest) {
    throw new TypeError(
      `allToAllSingle: output ${output.describe()} and input ${input.describe()} differ beyond dim 0`,
    );
  }
  return rest;
}

/** allToAllSingle's rows of `tensor` per group rank: `splits` checked, or dim 0 split evenly. */
export function allToAllSplits(
  group: CheckedGroup,
  splits: number[] | undefined,
  tensor: Tensor,
  what: string,
): number[] {
  const rows = tensor.shape[0];
  if (splits === undefined) {
    if (rows % group.size !== 0) {
      throw new RangeError(
        `allToAllSingle: dim 0 of ${tensor.describe()} is not divisible by the group size ${group.size}; pass ${what}`,
      );
    }
    return new Array(group.size).fill(rows / group.size);
  }
  if (
    !Array.isArray(splits) ||
    splits.length !== group.size ||
    splits.some((s) => !Number.isInteger(s) || s < 0)
  ) {
    throw new RangeError(`allToAllSingle: ${what} must be ${group.size} non-negative integers`);
  }
  const total = splits.reduce((a, b) => a + b, 0);
  if (total !== rows) {
    throw new RangeError(
      `allToAllSingle: ${what} sum to ${total}, but dim 0 of ${tensor.describe()} is ${rows}`,
    );
  }
  return splits;
}

/** allToAllSingle: the rows this rank sends itself are as many as it receives from itself. */
export function checkOwnRows(
  group: CheckedGroup,
  inputSplits: readonly number[],
  outputSplits: readonly number[],
): void {
  const rank = group.rank;
  if (inputSplits[rank] !== outputSplits[rank]) {
    throw new RangeError(
      `allToAllSingle: inputSplits[${rank}] = ${inputSplits[rank]} but outputSplits[${rank}] = ${outputSplits[rank]} (this rank sends to itself)`,
    );
  }
}

/**
 * A list only the root passes: torch raises when another rank passes one
 * (a sign the ranks disagree on who the root is); an empty one is no list.
 */
export function checkRootOnly(
  group: CheckedGroup,
  list: unknown,
  where: string,
  what: string,
  root: string,
): void {
  if (list === undefined || (Array.isArray(list) && list.length === 0)) return;
  throw new TypeError(
    `${where}: ${what} must not be given on group rank ${group.rank}, only on the root (${root})`,
  );
}

/** sendViews and recvViews only where the group's ranks map each other's memory (ThreadGroup.lendsViews). */
export function checkLendsViews(group: CheckedGroup & { readonly lendsViews: boolean }, where: string): void {
  if (!group.lendsViews) {
    throw new TypeError(
      `${where} on group "${group.name}": its ranks cannot map each other's memory (only ranks as threads can); check group.lendsViews`,
    );
  }
}

function sameDType(a: Tensor, b: Tensor, where: string): void {
  if (a.dtype !== b.dtype)
    throw new TypeError(`${where}: dtypes differ: ${a.describe()} and ${b.describe()}`);
}

export function checkTag(tag: unknown, where: string): number {
  if (tag === undefined) return 0;
  if (!Number.isSafeInteger(tag) || (tag as number) < 0) {
    throw new RangeError(`${where}: tag must be a non-negative integer, got ${String(tag)}`);
  }
  return tag as number;
}
