/**
 * The GPU work of each ThreadGroup call, as NCCL calls on the backend stream.
 * Calls that only move data move bytes (any dtype travels); reductions use
 * NCCL's type and op (nccl-dtypes.ts). Pairwise calls (all-to-all, gather,
 * scatter, batched send/recv) are one NCCL group of sends and receives, so
 * NCCL runs them together and no order of them can deadlock. Temporary
 * buffers are device tensors from the caching allocator, made when the call
 * is submitted (see DeviceOp).
 */

import type { DevicePointer } from '../cuda/api.ts';
import { type DeviceScratch, deviceScratch } from '../cuda/device-memory.ts';
import { type Device, itemSize } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { type NcclLibrary, NcclRedOp } from './api.ts';
import { NCCL_BYTES, type NcclReduction } from './nccl-dtypes.ts';
import type { DeviceOp, IssueContext } from './nccl-work-queue.ts';

/** Where a group's GPU calls run: this rank's place in the group and its GPU. */
export interface OpPlace {
  rank: number;
  size: number;
  device: Device;
}

/** A byte range of a device tensor (holding the tensor keeps its memory allocated while the call runs). */
export interface Span {
  tensor: Tensor;
  offset: number;
  bytes: number;
}

/** One send or receive of a group of them. */
export interface Transfer extends Span {
  kind: 'send' | 'recv';
  peer: number;
}

function at(tensor: Tensor, byteOffset = 0): DevicePointer {
  return tensor.devicePointer + BigInt(byteOffset);
}

function whole(tensor: Tensor): Span {
  return { tensor, offset: 0, bytes: tensor.nbytes };
}

/** Device bytes for one call; the op releases them once the call completed (work-queue: DeviceOp.release). */
function byteTemp(bytes: number, device: Device): DeviceScratch {
  return deviceScratch(device, [bytes], 'uint8', 'NCCL temporary buffer');
}

/** Runs `body` between ncclGroupStart and ncclGroupEnd, ending the group even when `body` fails. */
function grouped(nccl: NcclLibrary, body: () => void): void {
  nccl.groupStart();
  try {
    body();
  } catch (error) {
    // A group left open would capture this thread's next NCCL calls on every communicator.
    try {
      nccl.groupEnd();
    } catch {
      // `error` is the cause worth reporting; the communicator is aborted anyway.
    }
    throw error;
  }
  nccl.groupEnd();
}

/** Sends and receives as one NCCL group; empty ones are skipped (both ends skip them alike). */
export function transfers(list: readonly Transfer[]): DeviceOp {
  return {
    issue({ nccl, comm, stream }) {
      grouped(nccl, () => {
        for (const t of list) {
          if (t.bytes === 0) continue;
          const p = at(t.tensor, t.offset);
          if (t.kind === 'send') nccl.send(p, t.bytes, NCCL_BYTES, t.peer, comm, stream);
          else nccl.recv(p, t.bytes, NCCL_BYTES, t.peer, comm, stream);
        }
      });
    },
  };
}

/**
 * Runs `body` with NCCL's op for `reduction`. A premulSum op is made for this
 * call's NCCL calls and destroyed once they returned, which NCCL allows (the
 * op is resolved when a call is enqueued), so no op outlives its call.
 */
function reducing(ctx: IssueContext, reduction: NcclReduction, body: (op: number) => void): void {
  if (!reduction.premulScalar) {
    body(reduction.op);
    return;
  }
  const op = ctx.nccl.redOpCreatePreMulSum(reduction.premulScalar, reduction.dtype, ctx.comm);
  try {
    body(op);
  } finally {
    ctx.nccl.redOpDestroy(op, ctx.comm);
  }
}

/** A device-to-device copy on the backend stream; `source` is `target`'s size. */
function copy(ctx: IssueContext, target: Span, source: Span): void {
  const to = at(target.tensor, target.offset);
  const from = at(source.tensor, source.offset);
  if (source.bytes > 0 && to !== from) ctx.cuda.copyAsync(to, from, source.bytes, ctx.stream);
}

export function allReduce(tensor: Tensor, reduction: NcclReduction): DeviceOp {
  return {
    issue(ctx) {
      const p = at(tensor);
      reducing(ctx, reduction, (op) => {
        ctx.nccl.allReduce(p, p, tensor.numel, reduction.dtype, op, ctx.comm, ctx.stream);
      });
    },
  };
}

export function broadcast(tensor: Tensor, src: number): DeviceOp {
  return {
    issue({ nccl, comm, stream }) {
      const p = at(tensor);
      nccl.broadcast(p, p, tensor.nbytes, NCCL_BYTES, src, comm, stream);
    },
  };
}

/** Only the root's tensor changes, as in torch. */
export function reduce(tensor: Tensor, dst: number, reduction: NcclReduction): DeviceOp {
  return {
    issue(ctx) {
      const p = at(tensor);
      reducing(ctx, reduction, (op) => {
        ctx.nccl.reduce(p, p, tensor.numel, reduction.dtype, op, dst, ctx.comm, ctx.stream);
      });
    },
  };
}

/** Into a temporary buffer with one ncclAllGather, then copied out to each output. */
export function allGather(outputs: readonly Tensor[], input: Tensor, place: OpPlace): DeviceOp {
  const bytes = input.nbytes;
  const gathered = byteTemp(bytes * place.size, place.device);
  return {
    issue({ nccl, comm, stream }) {
      nccl.allGather(at(input), at(gathered.tensor), bytes, NCCL_BYTES, comm, stream);
    },
    after(ctx) {
      outputs.forEach((out, r) => {
        copy(ctx, whole(out), { tensor: gathered.tensor, offset: r * bytes, bytes });
      });
    },
    release: gathered.release,
  };
}

export function allGatherInto(output: Tensor, input: Tensor): DeviceOp {
  return {
    issue({ nccl, comm, stream }) {
      nccl.allGather(at(input), at(output), input.nbytes, NCCL_BYTES, comm, stream);
    },
  };
}

/**
 * The inputs packed into a temporary buffer, then one ncclReduceScatter. When
 * their sizes differ (rank p's output has the shape of inputs[p]), one
 * ncclReduce per rank into that rank's output, in one group, as torch's NCCL
 * backend does: ncclReduceScatter needs equal counts.
 */
export function reduceScatter(
  output: Tensor,
  inputs: readonly Tensor[],
  reduction: NcclReduction,
  place: OpPlace,
): DeviceOp {
  if (inputs.some((t) => t.numel !== output.numel)) return reducePerRank(output, inputs, reduction, place);
  const bytes = output.nbytes;
  const packed = byteTemp(bytes * place.size, place.device);
  return {
    issue(ctx) {
      inputs.forEach((input, r) => {
        copy(ctx, { tensor: packed.tensor, offset: r * bytes, bytes }, whole(input));
      });
      reducing(ctx, reduction, (op) => {
        const { nccl, comm, stream } = ctx;
        nccl.reduceScatter(at(packed.tensor), at(output), output.numel, reduction.dtype, op, comm, stream);
      });
    },
    release: packed.release,
  };
}

/** Empty blocks are skipped on every rank alike: every rank agrees on the sizes. */
function reducePerRank(
  output: Tensor,
  inputs: readonly Tensor[],
  reduction: NcclReduction,
  place: OpPlace,
): DeviceOp {
  return {
    issue(ctx) {
      reducing(ctx, reduction, (op) => {
        grouped(ctx.nccl, () => {
          inputs.forEach((input, root) => {
            if (input.numel === 0) return;
            // recvbuff matters on the root only; NCCL allows NULL elsewhere.
            const recv = root === place.rank ? at(output) : 0n;
            ctx.nccl.reduce(at(input), recv, input.numel, reduction.dtype, op, root, ctx.comm, ctx.stream);
          });
        });
      });
    },
  };
}

export function reduceScatterTensor(output: Tensor, input: Tensor, reduction: NcclReduction): DeviceOp {
  return {
    issue(ctx) {
      reducing(ctx, reduction, (op) => {
        const { nccl, comm, stream } = ctx;
        nccl.reduceScatter(at(input), at(output), output.numel, reduction.dtype, op, comm, stream);
      });
    },
  };
}

/** Own block copied locally; one send and one receive per peer, in one group. */
function exchange(outputs: readonly Span[], inputs: readonly Span[], place: OpPlace): DeviceOp {
  const pairs: Transfer[] = [];
  for (let peer = 0; peer < place.size; peer++) {
    if (peer === place.rank) continue;
    pairs.push({ kind: 'send', peer, ...inputs[peer] });
    pairs.push({ kind: 'recv', peer, ...outputs[peer] });
  }
  return withLocalCopy(outputs[place.rank], inputs[place.rank], transfers(pairs));
}

/** `op` preceded by a copy on the stream: the share a rank keeps for itself. */
function withLocalCopy(target: Span, source: Span, op: DeviceOp): DeviceOp {
  return {
    issue(ctx) {
      copy(ctx, target, source);
      op.issue(ctx);
    },
  };
}

export function allToAll(outputs: readonly Tensor[], inputs: readonly Tensor[], place: OpPlace): DeviceOp {
  return exchange(outputs.map(whole), inputs.map(whole), place);
}

/** Rows of `tensor` cut into consecutive blocks of `splits[r]` rows. */
function rowBlocks(tensor: Tensor, splits: readonly number[]): Span[] {
  const rowBytes = tensor.shape.slice(1).reduce((a, b) => a * b, 1) * itemSize(tensor.dtype);
  let offset = 0;
  return splits.map((rows) => {
    const block = { tensor, offset, bytes: rows * rowBytes };
    offset += block.bytes;
    return block;
  });
}

export function allToAllSingle(
  output: Tensor,
  input: Tensor,
  outputSplits: readonly number[],
  inputSplits: readonly number[],
  place: OpPlace,
): DeviceOp {
  return exchange(rowBlocks(output, outputSplits), rowBlocks(input, inputSplits), place);
}

export function gather(
  tensor: Tensor,
  dst: number,
  gatherList: readonly Tensor[] | undefined,
  place: OpPlace,
): DeviceOp {
  if (place.rank !== dst) return send(tensor, dst);
  const list = gatherList!;
  const receives = list.flatMap((t, peer): Transfer[] =>
    peer === dst ? [] : [{ kind: 'recv', peer, ...whole(t) }],
  );
  return withLocalCopy(whole(list[dst]), whole(tensor), transfers(receives));
}

export function scatter(
  tensor: Tensor,
  src: number,
  scatterList: readonly Tensor[] | undefined,
  place: OpPlace,
): DeviceOp {
  if (place.rank !== src) return recv(tensor, src);
  const list = scatterList!;
  const sends = list.flatMap((t, peer): Transfer[] =>
    peer === src ? [] : [{ kind: 'send', peer, ...whole(t) }],
  );
  return withLocalCopy(whole(tensor), whole(list[src]), transfers(sends));
}

/** An allReduce of one byte: returns on each member once every member has reached it. */
export function barrier(place: OpPlace): DeviceOp {
  const token = byteTemp(1, place.device);
  return { ...allReduce(token.tensor, { dtype: NCCL_BYTES, op: NcclRedOp.max }), release: token.release };
}

export function send(tensor: Tensor, dst: number): DeviceOp {
  return transfers([{ kind: 'send', peer: dst, ...whole(tensor) }]);
}

export function recv(tensor: Tensor, src: number): DeviceOp {
  return transfers([{ kind: 'recv', peer: src, ...whole(tensor) }]);
}
