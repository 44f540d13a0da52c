/**
 * scatterTensor / gatherTensor: a full tensor split across a mesh and put back
 * together, straight through the TensorStore handshake rather than collectives.
 * Only the source needs the full tensor; every block travels at its exact
 * (possibly uneven) shape, and the gatherer reads each block in place from its
 * producer's memory before saying it finished.
 *
 * Each value carries a tag with the sender's dtype, global shape and
 * placements; a receiver that disagrees fails, and so does the sender.
 */
import { CollectiveMismatchError, RankFailedError } from '../runtime/errors.ts';
import type { StoreEntry, TensorStore } from '../runtime/tensor-store.ts';
import { Work } from '../runtime/work.ts';
import type { DType } from '../tensor/dtype.ts';
import { reduceArrays } from '../tensor/reduce-kernels.ts';
import { Tensor } from '../tensor/tensor.ts';
import { describeValue } from '../tensor/validate.ts';
import { assertMesh, type DeviceMesh } from './device-mesh.ts';
import { DTensor } from './dtensor.ts';
import { blockOf, localBlock, type Span, viewOf } from './local-block.ts';
import { formatPlacements, normalizePlacements, type Placement } from './placement.ts';

export interface StoreTransferOptions {
  /** Wait limit of each store handshake; the store's default when omitted. */
  timeoutMs?: number;
}

/** Calls so far per mesh: members make them in the same order, so the count names a call everywhere. */
const calls = new WeakMap<DeviceMesh, number>();

function callPrefix(mesh: DeviceMesh, what: string): string {
  const n = calls.get(mesh) ?? 0;
  calls.set(mesh, n + 1);
  return `${mesh.id}:${what}${n}`;
}

/** e.g. 'float32[5,3] [Shard(0), Replicate()]': what the sender and receiver must agree on. */
function tagOf(dtype: DType, shape: readonly number[], placements: readonly Placement[]): string {
  return `${dtype}[${shape}] ${formatPlacements(placements)}`;
}

function shapeInTag(tag: string): number[] {
  const dims = /^\w+\[([\d,]*)\]/.exec(tag)?.[1] ?? '';
  return dims === '' ? [] : dims.split(',').map(Number);
}

/** Tag of a value that carries, instead of a block, the source's error message. */
const FAILED_TAG = 'scatterTensor:failed';

function checkIndex(value: number, mesh: DeviceMesh, what: string, where: string): number {
  if (!Number.isInteger(value) || value < 0 || value >= mesh.size) {
    throw new RangeError(`${where}: ${what} ${value} is not an index of ${mesh}`);
  }
  return value;
}

/** Reads one value, hands it to `use` and finishes the get, reporting a failure to the producer. */
async function consume<T>(
  store: TensorStore,
  key: string,
  from: number,
  timeoutMs: number | undefined,
  use: (entry: StoreEntry) => T,
): Promise<T> {
  const entry = await store.destGetEntry(key, { timeoutMs, from });
  let result: T;
  try {
    result = use(entry);
  } catch (error) {
    const mismatch = error instanceof CollectiveMismatchError;
    await store.destFinishGet(key, { error: (error as Error).message, mismatch });
    throw error;
  }
  await store.destFinishGet(key);
  return result;
}

/**
 * Splits `full`, given on mesh index `src` (0 by default; other ranks may pass
 * undefined), into the blocks `placements` assign, one store value per rank.
 */
export function scatterTensor(
  full: Tensor | undefined,
  mesh: DeviceMesh,
  placements: readonly Placement[],
  options: StoreTransferOptions & { src?: number } = {},
): Work<DTensor> {
  return Work.run(async () => {
    const where = 'scatterTensor';
    assertMesh(mesh, where);
    const store = mesh.store(where);
    const src = checkIndex(options.src ?? 0, mesh, 'src', where);
    const prefix = callPrefix(mesh, 's');
    const { timeoutMs } = options;
    const key = (i: number) => `${prefix}:${i}`;
    if (mesh.rank === src) {
      const others = Array.from({ length: mesh.size }, (_, i) => i).filter((i) => i !== src);
      const publish = async (blockOf: (i: number) => Tensor, tag: string) => {
        for (const i of others) await store.srcSet(key(i), blockOf(i), 1, { tag, to: [mesh.ranks[i]] });
        await Promise.all(others.map((i) => store.srcWaitUntilGetFinished(key(i), { timeoutMs })));
      };
      let norm: Placement[];
      try {
        if (!(full instanceof Tensor)) {
          throw new TypeError(
            `${where}: full must be a Tensor on the source (mesh index ${src}), got ${describeValue(full)}`,
          );
        }
        norm = normalizePlacements(placements, mesh.ndim, full.shape.length, full.dtype, where);
      } catch (error) {
        // The receivers fail now with this error instead of timing out.
        const message = new TextEncoder().encode((error as Error).message);
        // Receivers acknowledge the report with their own copy of it: nothing to add to `error`.
        await publish(() => Tensor.fromArray(message, [message.length], 'uint8'), FAILED_TAG).catch(() => {});
        throw error;
      }
      await publish(
        (i) => localBlock(full, norm, mesh.shape, mesh.coordinateOf(i)),
        tagOf(full.dtype, full.shape, norm),
      );
      const mine = localBlock(full, norm, mesh.shape, mesh.coordinate);
      return DTensor.fromLocal(mine, mesh, norm, { shape: full.shape });
    }
    return consume(store, key(mesh.rank), mesh.ranks[src], timeoutMs, ({ tensor, tag }) => {
      if (tag === FAILED_TAG) {
        throw new RankFailedError(
          `${where}: the source (mesh index ${src}) failed: ${new TextDecoder().decode(tensor.bytes())}`,
          mesh.ranks[src],
        );
      }
      const shape = shapeInTag(tag);
      const norm = normalizePlacements(placements, mesh.ndim, shape.length, tensor.dtype, where);
      if (tagOf(tensor.dtype, shape, norm) !== tag) {
        throw new CollectiveMismatchError(
          `${where}: mesh index ${src} scattered ${tag}, but mesh index ${mesh.rank} expects placements ${formatPlacements(norm)}`,
        );
      }
      return DTensor.fromLocal(tensor.clone(), mesh, norm, { shape });
    });
  });
}

/**
 * Puts the global tensor of `d` together on mesh index `dst` (0 by default),
 * which resolves to it; the other ranks resolve to undefined. One rank per
 * replicated line sends its block; Partial terms are reduced at `dst`.
 */
export function gatherTensor(
  d: DTensor,
  options: StoreTransferOptions & { dst?: number } = {},
): Work<Tensor | undefined> {
  return Work.run(async () => {
    const where = 'gatherTensor';
    if (!(d instanceof DTensor)) throw new TypeError(`${where}: expected a DTensor, got ${describeValue(d)}`);
    const { mesh, placements } = d;
    const store = mesh.store(where);
    const dst = checkIndex(options.dst ?? 0, mesh, 'dst', where);
    const prefix = callPrefix(mesh, 'g');
    const { timeoutMs } = options;
    const tag = tagOf(d.dtype, d.shape, placements);
    const sends = (coord: readonly number[]) =>
      placements.every((p, m) => p.kind !== 'replicate' || coord[m] === 0);
    if (mesh.rank !== dst) {
      if (sends(mesh.coordinate)) {
        const key = `${prefix}:${mesh.rank}`;
        await store.srcSet(key, d.toLocal(), 1, { tag, to: [mesh.ranks[dst]] });
        await store.srcWaitUntilGetFinished(key, { timeoutMs });
      }
      return undefined;
    }
    const full = Tensor.empty(d.shape, d.dtype);
    const op = placements.find((p) => p.kind === 'partial')?.op;
    // Under Partial a block has one term per partial coordinate, reduced once all arrived (avg cannot fold).
    const partialBlocks = new Map<string, { spans: Span[]; terms: Tensor[] }>();
    const take = (index: number, block: Tensor) => {
      const spans = blockOf(d.shape, placements, mesh.shape, mesh.coordinateOf(index));
      if (op === undefined) {
        viewOf(full, spans).copy_(block);
        return;
      }
      const at = JSON.stringify(spans);
      const entry = partialBlocks.get(at) ?? { spans, terms: [] };
      entry.terms.push(block.clone());
      partialBlocks.set(at, entry);
    };
    for (let i = 0; i < mesh.size; i++) {
      if (!sends(mesh.coordinateOf(i))) continue;
      if (i === dst) take(i, d.toLocal());
      else {
        await consume(store, `${prefix}:${i}`, mesh.ranks[i], timeoutMs, (entry) => {
          if (entry.tag !== tag) {
            throw new CollectiveMismatchError(
              `${where}: mesh index ${i} sent ${entry.tag}, but mesh index ${dst} gathers ${tag}`,
            );
          }
          take(i, entry.tensor);
        });
      }
    }
    for (const { spans, terms } of partialBlocks.values()) {
      const reduced = Tensor.empty(terms[0].shape, d.dtype);
      reduceArrays(
        op!,
        d.dtype,
        reduced.data,
        terms.map((t) => t.data),
      );
      viewOf(full, spans).copy_(reduced);
    }
    return full;
  });
}
