/**
 * receive({ into }): the tensors a receiver loads a sync straight into (its
 * model's parameters, as vLLM's load_weights fills existing ones), so that a
 * tensor costs the receiver one copy from wherever its bucket landed, or none
 * past the receive where the payload can land in it directly (a relay's
 * followers, receiver.ts). Each bucket's targets are looked up and checked
 * when its header arrives, before any byte of that bucket is written: a
 * target of another dtype or shape than the stream's tensor fails the sync.
 * A name `into` does not give is yielded as without it.
 */
import { Tensor } from '../tensor/tensor.ts';
import { describeValue } from '../tensor/validate.ts';
import { WeightSyncError } from './errors.ts';
import type { BucketEntry, BucketHeader } from './header.ts';

/** Per tensor name, the tensor to load it into: a map, or a function (undefined: yield it as without `into`). */
export type LoadInto = ReadonlyMap<string, Tensor> | ((name: string) => Tensor | undefined);

/** Where an entry's bytes go: `bytes` is the entry's piece of `target`'s memory. */
export interface Landing {
  target: Tensor;
  bytes: Uint8Array;
}

export function checkLoadInto(into: unknown, where: string): LoadInto | undefined {
  if (into === undefined || into instanceof Map || typeof into === 'function') return into as LoadInto;
  throw new TypeError(
    `${where}: options.into must be a Map of tensor name to Tensor or a function (name) => Tensor | undefined, ` +
      `got ${describeValue(into)}`,
  );
}

/** Each entry's landing in `into` (undefined for a name it does not give), checked against the bucket's header. */
export function landingsOf(into: LoadInto, header: BucketHeader, where: string): Array<Landing | undefined> {
  return header.entries.map((e) => {
    const target = typeof into === 'function' ? into(e.name) : into.get(e.name);
    if (target === undefined) return undefined;
    checkTarget(target, e, header.index, where);
    const bytes = target.bytes().subarray(e.chunkStart, e.chunkStart + e.chunkBytes);
    return { target, bytes };
  });
}

function checkTarget(
  target: unknown,
  e: BucketEntry,
  bucket: number,
  where: string,
): asserts target is Tensor {
  const stream = `${e.dtype}[${e.shape.join(',')}]`;
  const at = `${where}: into gives '${e.name}' as`;
  const refused = `nothing of bucket ${bucket} was written`;
  if (!(target instanceof Tensor)) {
    throw new WeightSyncError(
      `${at} ${describeValue(target)}, not a Tensor (the sync's is ${stream}): ${refused}`,
    );
  }
  if (target.dtype !== e.dtype || target.shape.join() !== e.shape.join()) {
    throw new WeightSyncError(
      `${at} ${target.describe()}, but the sync's '${e.name}' is ${stream}: ${refused}; ` +
        'give a tensor of the same dtype and shape, or leave the name out of into to be given the tensor',
    );
  }
  if (target.device !== 'cpu' || !target.isContiguous()) {
    throw new WeightSyncError(
      `${at} ${target.describe()} on ${target.device}${target.isContiguous() ? '' : ', not contiguous'}: ` +
        `the engine loads only contiguous host tensors (${refused}); leave it out of into and copy_ the tensor given`,
    );
  }
}
