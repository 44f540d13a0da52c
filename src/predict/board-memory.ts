/**
 * Where a group's members post what predict mode exchanges without a call of
 * its own (clock-board.ts, message-stamps.ts): a part of the same bytes for
 * each member, in memory every member maps. Thread ranks take one region
 * they all map (TensorStore.sharedRegion); process ranks of one node each a
 * file of the job directory that the member makes and the others map
 * (TensorStore.nodeRegion). Each board lays out its members' parts itself.
 */
import { onOneNode, type SharedRegion, type TensorStore } from '../runtime/tensor-store.ts';
import type { WaitStop } from '../runtime/wait.ts';

/** A member's part of a board: `memberBytes` at `byteOffset` of `buffer`. */
export interface MemberPart {
  buffer: ArrayBufferLike;
  byteOffset: number;
}

export interface BoardMemory {
  /** Member `member`'s part; undefined while that member has not made it (its file is not there yet). */
  part(member: number): MemberPart | undefined;
  /** Ends the board's waits: the job's abort. */
  abort?: WaitStop;
}

/** The board of `size` members in one region they all map: each member's part after the one before's. */
export function regionBoard(region: SharedRegion, size: number, memberBytes: number): BoardMemory {
  if (region.byteLength < size * memberBytes)
    throw new RangeError(`a board of ${size} ranks needs ${size * memberBytes} bytes`);
  return {
    part: (member) => ({ buffer: region.buffer, byteOffset: region.byteOffset + member * memberBytes }),
    abort: region.abort,
  };
}

/**
 * The board of a group whose members are processes of one node, each
 * member's part a file of its own (TensorStore.nodeRegion), this member's
 * made now; undefined where the store maps no files.
 */
export function nodeFilesBoard(
  store: TensorStore,
  key: string,
  ranks: readonly number[],
  rank: number,
  memberBytes: number,
): BoardMemory | undefined {
  const own = store.nodeRegion?.(key, ranks[rank], memberBytes);
  if (!own) return undefined;
  return {
    part: (member) => {
      const region = member === rank ? own : store.nodeRegion?.(key, ranks[member], memberBytes);
      return region && { buffer: region.buffer, byteOffset: 0 };
    },
    abort: own.abort,
  };
}

/** A group's board of `memberBytes` a member under `key`, in memory its members map; undefined where they map none. */
export function boardMemory(
  store: TensorStore,
  key: string,
  group: { ranks: readonly number[]; rank: number; size: number },
  memberBytes: number,
): BoardMemory | undefined {
  if (group.size < 2) return undefined;
  const region = store.sharedRegion?.(key, group.size * memberBytes);
  if (region) return regionBoard(region, group.size, memberBytes);
  return onOneNode(store, group.ranks)
    ? nodeFilesBoard(store, key, group.ranks, group.rank, memberBytes)
    : undefined;
}

/** A member's part as a board reads it: its values, then its words. */
export interface PartViews {
  values: Float64Array;
  words: Int32Array;
}

/** Bytes of a member's part of `values` doubles and `words` 32-bit words. */
export function partBytes(values: number, words: number): number {
  return values * Float64Array.BYTES_PER_ELEMENT + words * Int32Array.BYTES_PER_ELEMENT;
}

/** Each member's part of a board, viewed as `values` doubles and `words` words once found. */
export class BoardParts {
  readonly #memory: BoardMemory;
  readonly #values: number;
  readonly #words: number;
  readonly #views: Array<PartViews | undefined>;

  constructor(memory: BoardMemory, size: number, values: number, words: number) {
    this.#memory = memory;
    this.#values = values;
    this.#words = words;
    this.#views = Array.from({ length: size }, () => undefined);
  }

  get abort(): WaitStop | undefined {
    return this.#memory.abort;
  }

  /** Member `member`'s part; undefined while it has not made it. */
  of(member: number): PartViews | undefined {
    if (this.#views[member] === undefined) {
      const part = this.#memory.part(member);
      if (part) {
        const { buffer, byteOffset } = part;
        this.#views[member] = {
          values: new Float64Array(buffer, byteOffset, this.#values),
          words: new Int32Array(
            buffer,
            byteOffset + this.#values * Float64Array.BYTES_PER_ELEMENT,
            this.#words,
          ),
        };
      }
    }
    return this.#views[member];
  }
}
