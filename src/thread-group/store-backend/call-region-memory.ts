/**
 * Where a group's call region (call-region.ts) lives, and how its waits are
 * woken. Thread ranks: a region of the job's shared arena, waits parked on
 * its words (Atomics). Process ranks of one node: a file of the job
 * directory that the group's rank 0 makes and every member maps (a node
 * region), waits parked on their process's doorbell, which the rank that
 * stored a word rings for every other member while any of them sleeps on it.
 */
import type { JobStop } from '../../runtime/abort-word.ts';
import { onOneNode, type SharedRegion, type TensorStore } from '../../runtime/tensor-store.ts';
import { wake } from '../../runtime/wait.ts';

/** A region's bytes. */
export interface RegionBytes {
  buffer: ArrayBufferLike;
  byteOffset: number;
  byteLength: number;
}

export interface CallRegionMemory {
  /** The region; undefined while its owner has not made it (a process group's, made by its group rank 0). */
  bytes(): RegionBytes | undefined;
  abort: JobStop | undefined;
  /** See SharedRegion.mayBlock; undefined where no wait may block its thread. */
  mayBlock: (() => boolean) | undefined;
  /** Wakes the waits on words[index] where any counted itself on words[sleepers] (see wait.ts's wake). */
  wake(words: Int32Array, index: number, sleepers: number): void;
  /** How a wait parks on memory that Atomics cannot park on (WaitOptions.park); undefined where it can. */
  park: ((ms: number) => Promise<void>) | undefined;
  /** This rank is done with the region (its group destroyed): what it holds of it goes. */
  release(): void;
  /**
   * Whether the members cannot read each other's tensors in place (processes):
   * the keyed store then copies every byte too, and the region serves larger
   * allReduces (regionMaxBytes).
   */
  copiesOnly: boolean;
}

/**
 * The call region of `bytes` of the group of `ranks` (global ranks; this rank
 * is group rank `rank`) under `key`, where its members map common memory: one
 * region of the job's arena (thread ranks), the file of its group rank 0
 * (process ranks of one node); else undefined.
 */
export function callRegionMemory(
  store: TensorStore,
  key: string,
  bytes: number,
  ranks: readonly number[],
  rank: number,
): CallRegionMemory | undefined {
  const shared = store.sharedRegion?.(key, bytes);
  if (shared) return arenaRegion(shared);
  if (!onOneNode(store, ranks)) return undefined;
  // Process ranks of one node: the file of the group's rank 0, which it makes now and the others map
  // once it is there; without doorbells (no rings: files cannot be mapped here) no member has it.
  const fileKey = `${key}:calls`;
  const owner = ranks[0];
  const find = () => store.nodeRegion?.(fileKey, owner, bytes);
  const bells = store.nodeDoorbells?.();
  if (!bells) return undefined;
  let file = rank === 0 ? find() : undefined;
  if (rank === 0 && !file) return undefined;
  return {
    bytes: () => {
      file ??= find();
      return file && { buffer: file.buffer, byteOffset: 0, byteLength: bytes };
    },
    abort: bells.stop,
    mayBlock: undefined,
    wake: (words, _index, sleepers) => {
      if (Atomics.load(words, sleepers) === 0) return;
      for (const [member, global] of ranks.entries()) if (member !== rank) bells.ring(global);
    },
    park: (ms) => bells.park(ms),
    copiesOnly: true,
    release: () => {
      if (file) store.releaseNodeRegion?.(fileKey, owner);
      file = undefined;
    },
  };
}

function arenaRegion(region: SharedRegion): CallRegionMemory {
  return {
    bytes: () => region,
    abort: region.abort,
    mayBlock: region.mayBlock,
    wake: (words, index, sleepers) => void wake(words, index, sleepers),
    park: undefined,
    copiesOnly: false,
    // The region is the job's arena's, for the job's life.
    release: () => {},
  };
}
