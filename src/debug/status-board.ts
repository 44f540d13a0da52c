/**
 * StatusBoard: one row per rank that any rank can read, so a rank that waits
 * too long can say where every other rank is. A call updates a few numbers
 * of its own row (cheap enough for every call); the text part, a JSON
 * RankSnapshot, is rewritten only when something worth reporting happens
 * (a group is created, a wait gets slow, a call fails, the rank exits).
 * ThreadStatusBoard keeps the rows in a SharedArrayBuffer; FileStatusBoard
 * (processes) keeps them as files in the job's directory.
 */

export const RankState = { notStarted: 0, running: 1, exited: 2 } as const;
export type RankStateCode = (typeof RankState)[keyof typeof RankState];

/** The numbers a rank updates on every call: its latest started and completed call. */
export interface CallMark {
  seq: number;
  /** An op code (opCode), -1 for none. */
  op: number;
  /** Index into the rank's own group list (its snapshot's `groups`). */
  group: number;
  /** Date.now() when it happened. */
  at: number;
}

export interface SnapshotGroup {
  id: string;
  name: string;
}

export interface SnapshotCall {
  group: number;
  seq: number;
  call: string;
  since: number;
  site?: string;
  waitingFor?: string;
  /** The first line of the error the call failed with, and the error's name. */
  failed?: string;
  failedName?: string;
}

/** What a rank last wrote about itself. */
export interface RankSnapshot {
  rank: number;
  at: number;
  groups: SnapshotGroup[];
  pending: SnapshotCall[];
  /** Calls that failed, newest last (their sites go into peers' mismatch errors). */
  failed: SnapshotCall[];
  /** Set once the rank left its main function. */
  exit?: string;
}

/**
 * The exit note of a rank whose main returned, or, given what it threw, of one whose main failed: one
 * line, the error's first, as it goes into peers' messages and hang reports (the rest, e.g. the rank's
 * own hang report, is the rank's to print, and a peer's report that quoted it printed it twice).
 */
export function exitNote(failure?: unknown): string {
  if (failure === undefined) return 'it left its main function';
  // Only to print a thrown value that is no Error.
  const error = failure instanceof Error ? failure : new Error(String(failure));
  return `it failed with ${error.name}: ${error.message.split('\n')[0]}`;
}

/** How a rank that has exited left, as peers are told it. */
export function departureNote(status: RankStatus): string {
  return status.snapshot?.exit ?? exitNote();
}

export interface RankStatus {
  rank: number;
  state: RankStateCode;
  started: CallMark;
  done: CallMark;
  pending: number;
  snapshot: RankSnapshot | undefined;
  /** Date.now() of the rank's latest heartbeat or row write, where its board knows it (liveness.ts). */
  seen?: number;
}

export interface StatusBoard {
  readonly worldSize: number;
  /** `at`: milliseconds since the epoch (the caller's clock reading, so a call reads the clock once). */
  callStarted(rank: number, seq: number, op: number, group: number, at: number): void;
  callEnded(rank: number, seq: number, op: number, group: number, at: number): void;
  setState(rank: number, state: RankStateCode): void;
  writeSnapshot(rank: number, snapshot: RankSnapshot): void;
  read(rank: number): RankStatus;
}

/**
 * Int32 words of a row, then its Float64 times. A row's snapshot text has two slots, each
 * with its own seqlock version and length: the writer fills the slot not published, then
 * publishes it, so a reader always finds one whole snapshot even while the writer is
 * descheduled (or killed) mid-write.
 */
const Word = {
  state: 0,
  published: 1,
  pending: 2,
  startedSeq: 3,
  startedOp: 4,
  startedGroup: 5,
  doneSeq: 6,
  doneOp: 7,
  doneGroup: 8,
  slotVersion: 9,
  slotLength: 11,
  /**
   * Two cache lines per row (13 words used): a rank's writes on every call
   * must not invalidate a line its neighbour writes on its own. Two, since a
   * SharedArrayBuffer's start need not be a line's: a row of at most one
   * line's bytes, 128 bytes after the last, never shares a line with it.
   */
  count: 32,
} as const;
/** Likewise two cache lines of times per rank (2 used). */
const Time = { started: 0, done: 1, count: 16 } as const;
const SLOTS = 2;
/** Reads of a slot the writer is overwriting at that moment (it published twice since): rare, bounded. */
const READ_ATTEMPTS = 16;

export interface ThreadStatusShared {
  buffer: SharedArrayBuffer;
  worldSize: number;
  textBytes: number;
}

function textBytesFor(worldSize: number): number {
  return worldSize <= 64 ? 8192 : 1024;
}

export class ThreadStatusBoard implements StatusBoard {
  readonly worldSize: number;
  readonly #words: Int32Array;
  readonly #times: Float64Array;
  readonly #text: Uint8Array;
  readonly #textBytes: number;
  /**
   * The last snapshot this reader decoded per rank, with the publication it
   * came from: served again while the rank publishes nothing newer (a wait
   * looks up every peer's row twice every 100 ms: 126 reads a look at 64
   * ranks), and when the writer outruns every attempt.
   */
  readonly #lastRead = new Map<number, { published: number; snapshot: RankSnapshot }>();

  static createShared(worldSize: number): ThreadStatusShared {
    const textBytes = textBytesFor(worldSize);
    const bytes = worldSize * (Time.count * 8 + Word.count * 4 + SLOTS * textBytes);
    return { buffer: new SharedArrayBuffer(bytes), worldSize, textBytes };
  }

  constructor(shared: ThreadStatusShared) {
    this.worldSize = shared.worldSize;
    this.#textBytes = shared.textBytes;
    this.#times = new Float64Array(shared.buffer, 0, shared.worldSize * Time.count);
    const wordsAt = this.#times.byteLength;
    this.#words = new Int32Array(shared.buffer, wordsAt, shared.worldSize * Word.count);
    this.#text = new Uint8Array(shared.buffer, wordsAt + this.#words.byteLength);
  }

  callStarted(rank: number, seq: number, op: number, group: number, at: number): void {
    const w = rank * Word.count;
    this.#words[w + Word.startedSeq] = seq;
    this.#words[w + Word.startedOp] = op;
    this.#words[w + Word.startedGroup] = group;
    this.#words[w + Word.pending]++;
    this.#times[rank * Time.count + Time.started] = at;
  }

  callEnded(rank: number, seq: number, op: number, group: number, at: number): void {
    const w = rank * Word.count;
    this.#words[w + Word.doneSeq] = seq;
    this.#words[w + Word.doneOp] = op;
    this.#words[w + Word.doneGroup] = group;
    this.#words[w + Word.pending]--;
    this.#times[rank * Time.count + Time.done] = at;
  }

  setState(rank: number, state: RankStateCode): void {
    Atomics.store(this.#words, rank * Word.count + Word.state, state);
  }

  /** Only the row's own rank writes it, so the slot not published is the writer's alone to fill. */
  writeSnapshot(rank: number, snapshot: RankSnapshot): void {
    const encoded = encodeWithin(snapshot, this.#textBytes);
    const w = rank * Word.count;
    const published = Atomics.load(this.#words, w + Word.published);
    const slot = (published + 1) % SLOTS;
    Atomics.add(this.#words, w + Word.slotVersion + slot, 1);
    this.#text.set(encoded, (rank * SLOTS + slot) * this.#textBytes);
    Atomics.store(this.#words, w + Word.slotLength + slot, encoded.length);
    Atomics.add(this.#words, w + Word.slotVersion + slot, 1);
    Atomics.store(this.#words, w + Word.published, published + 1);
  }

  read(rank: number): RankStatus {
    const w = rank * Word.count;
    const t = rank * Time.count;
    const words = this.#words;
    return {
      rank,
      state: Atomics.load(words, w + Word.state) as RankStateCode,
      started: {
        seq: words[w + Word.startedSeq],
        op: words[w + Word.startedOp],
        group: words[w + Word.startedGroup],
        at: this.#times[t + Time.started],
      },
      done: {
        seq: words[w + Word.doneSeq],
        op: words[w + Word.doneOp],
        group: words[w + Word.doneGroup],
        at: this.#times[t + Time.done],
      },
      pending: words[w + Word.pending],
      snapshot: this.#readSnapshot(rank),
    };
  }

  /** A seqlock read of the published slot; a version that moved means the writer reused it: read anew. */
  #readSnapshot(rank: number): RankSnapshot | undefined {
    const w = rank * Word.count;
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const published = Atomics.load(this.#words, w + Word.published);
      if (published === 0) return undefined;
      const last = this.#lastRead.get(rank);
      // The published slot is never written while it stays published.
      if (last?.published === published) return last.snapshot;
      const slot = published % SLOTS;
      const before = Atomics.load(this.#words, w + Word.slotVersion + slot);
      if (before % 2 === 1) continue;
      const length = Atomics.load(this.#words, w + Word.slotLength + slot);
      const start = (rank * SLOTS + slot) * this.#textBytes;
      const copy = this.#text.slice(start, start + length);
      if (Atomics.load(this.#words, w + Word.slotVersion + slot) !== before) continue;
      const snapshot = JSON.parse(new TextDecoder().decode(copy)) as RankSnapshot;
      this.#lastRead.set(rank, { published, snapshot });
      return snapshot;
    }
    return this.#lastRead.get(rank)?.snapshot;
  }
}

/** JSON of the snapshot in at most `limit` bytes: oldest pending and failed calls are dropped to fit. */
export function encodeWithin(snapshot: RankSnapshot, limit: number): Uint8Array {
  const s = { ...snapshot, pending: [...snapshot.pending], failed: [...snapshot.failed] };
  for (;;) {
    const encoded = new TextEncoder().encode(JSON.stringify(s));
    if (encoded.length <= limit) return encoded;
    if (s.pending.length > 1) s.pending.shift();
    else if (s.failed.length > 0) s.failed.shift();
    else if (s.groups.length > 1) s.groups.pop();
    else
      return new TextEncoder().encode(
        JSON.stringify({ rank: s.rank, at: s.at, groups: [], pending: [], failed: [] }),
      );
  }
}
