/**
 * How a packed bucket crosses to another node: in pieces, each a message
 * of its own. An entry large enough to pay for a message goes alone,
 * straight from the sender's tensor (nothing packed) to where the receiver
 * wants it (its `into` target, a relay's node memory, its buffer: nothing
 * copied again). The small entries between two such go together, as the
 * run of the packed payload they cover, alignment gaps included. Both ends
 * cut a bucket the same way from its header alone. On one node a bucket is
 * one message, since there the receiver copies it from the sender's memory
 * whole, or borrows it.
 */
import type { BucketEntry } from './header.ts';

/** What cutting a bucket needs of each entry. */
type Placed = Pick<BucketEntry, 'offset' | 'chunkBytes'>;

/** An entry of at least this many bytes (or a quarter of its bucket's payload) travels alone. */
const ALONE_MIN_BYTES = 256 * 1024;

/** Bytes [start, start + bytes) of the packed payload, holding entries [first, end). */
export interface Piece {
  first: number;
  end: number;
  start: number;
  bytes: number;
}

/** The pieces of a bucket's payload (`payloadBytes`, the used part) in order; a run of empty entries is no piece. */
export function piecesOf(entries: readonly Placed[], payloadBytes: number): Piece[] {
  const aloneFrom = Math.min(ALONE_MIN_BYTES, payloadBytes / 4);
  const pieces: Piece[] = [];
  let runFirst = 0;
  const closeRun = (end: number) => {
    const run = runOf(entries, runFirst, end);
    if (run) pieces.push(run);
  };
  for (const [i, e] of entries.entries()) {
    if (e.chunkBytes === 0 || e.chunkBytes < aloneFrom) continue;
    closeRun(i);
    pieces.push({ first: i, end: i + 1, start: e.offset, bytes: e.chunkBytes });
    runFirst = i + 1;
  }
  closeRun(entries.length);
  return pieces;
}

/** Whether `piece` is one entry alone: it travels from the entry's tensor and lands where the entry goes. */
export function isAlone(piece: Piece): boolean {
  return piece.end - piece.first === 1;
}

function runOf(entries: readonly Placed[], first: number, end: number): Piece | undefined {
  if (end <= first) return undefined;
  const start = entries[first].offset;
  const last = entries[end - 1];
  const bytes = last.offset + last.chunkBytes - start;
  return bytes > 0 ? { first, end, start, bytes } : undefined;
}
