/**
 * reduce-scatter of a large host tensor in chunks that flow one after the
 * other, where the store copies values between ranks (processes, nodes):
 * every rank publishes, for each peer p, chunk after chunk of its part for p
 * (views of its own input), and reduces each chunk of its own part as soon as
 * every peer's copy of it has come, while later chunks are still being
 * copied. Copying and reducing overlap, where publishing whole parts made
 * the reduction wait for the last byte of the copy. allReduce's pipelined
 * path (all-reduce-pipelined.ts) is this, with each reduced chunk published
 * on as it is done.
 *
 * The caller compares the ranks' calls first: every value here goes to one
 * peer only.
 */
import { itemSize } from '../../tensor/dtype.ts';
import type { ReduceOp } from '../../tensor/reduce-ops.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { Exchange } from './exchange.ts';
import { elements, reduceInto } from './slices.ts';

/**
 * The largest chunk a part is cut into: large enough that per-value costs
 * (a handshake and a wake-up each, whatever the size) vanish, small enough
 * to overlap. Tests set it small to cut tensors into many chunks.
 */
export const pipelineOptions = { chunkBytes: 8 << 20 };

/** From this many bytes of input on, the chunks overlap enough to pay for the calls' extra exchange. */
const PIPELINED_MIN_BYTES = 2 << 20;

/** Whether a reduction of `inputBytes` of host tensor `t` is worth chunks: where the store copies values (lands them in place). */
export function worthPipelining(x: Exchange, t: Tensor, inputBytes: number): boolean {
  return t.device === 'cpu' && x.landsInPlace && inputBytes >= PIPELINED_MIN_BYTES;
}

/** Phase keys: chunk c of the reduce-scatter, and of what a caller sends on from it (allReduce's all-gather). */
export const scatterPhase = (c: number) => 2 * c;
export const onwardPhase = (c: number) => 2 * c + 1;

/** The element ranges [start, end) of `numel` elements, starting at `from`, cut into chunks of at most `chunkBytes`. */
export function chunkRanges(
  from: number,
  numel: number,
  itemBytes: number,
  chunkBytes: number,
): [number, number][] {
  const per = Math.max(1, Math.floor(chunkBytes / itemBytes));
  const chunks: [number, number][] = [];
  for (let at = from; at < from + numel; at += per) chunks.push([at, Math.min(from + numel, at + per)]);
  return chunks;
}

export interface PipelinedParts {
  /** This rank's contribution to each rank's result, flat: `parts[p]` for rank p. */
  parts: readonly Tensor[];
  /** Where this rank's reduced part goes: flat, as long as parts[rank], possibly parts[rank] itself. */
  result: Tensor;
}

/**
 * Reduces every rank's parts[rank] into `result` in chunks; `reduced(c,
 * chunk)` runs once chunk c of the result is final (allReduce publishes it on
 * there). Returns how many chunks went to each peer: the caller waits until
 * they were read (`x.consumed(scatterPhase(c), p)`) before its input changes.
 */
export async function reduceScatterChunks(
  x: Exchange,
  { parts, result }: PipelinedParts,
  op: ReduceOp,
  chunkBytes: number,
  reduced?: (c: number, chunk: Tensor) => Promise<void>,
): Promise<number[]> {
  const itemBytes = itemSize(result.dtype);
  const chunks = parts.map((part) => chunkRanges(0, part.numel, itemBytes, chunkBytes));
  const peers = x.peers();
  const most = Math.max(...chunks.map((c) => c.length));
  for (let c = 0; c < most; c++) {
    for (const p of peers)
      if (c < chunks[p].length)
        await x.publishOperand(scatterPhase(c), elements(parts[p], ...chunks[p][c]), [p], p);
  }
  const me = x.rank;
  for (let c = 0; c < chunks[me].length; c++) {
    const range = chunks[me][c];
    const inputs: Tensor[] = [];
    for (let p = 0; p < x.size; p++)
      inputs.push(p === me ? elements(parts[me], ...range) : await x.get(scatterPhase(c), p, me));
    const into = elements(result, ...range);
    reduceInto(op, into, inputs);
    for (const p of peers) await x.finish(scatterPhase(c), p, me);
    await reduced?.(c, into);
  }
  return chunks.map((c) => c.length);
}

/**
 * reduceScatter's large path where the store copies values: the parts
 * reduced chunk by chunk into `output`, every chunk this rank published read
 * before it returns. The caller has compared the ranks' calls.
 */
export async function reduceScatterPipelined(
  x: Exchange,
  output: Tensor,
  inputs: readonly Tensor[],
  op: ReduceOp,
  chunkBytes = pipelineOptions.chunkBytes,
): Promise<void> {
  const parts = inputs.map((t) => elements(t));
  const sent = await reduceScatterChunks(x, { parts, result: elements(output) }, op, chunkBytes);
  for (const p of x.peers()) for (let c = 0; c < sent[p]; c++) await x.consumed(scatterPhase(c), p);
}
