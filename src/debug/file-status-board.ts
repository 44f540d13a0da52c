/**
 * StatusBoard for ranks that are processes: each rank's row is a small JSON
 * file in the job's directory, rewritten (atomically, by rename) only when the
 * rank publishes a snapshot or changes state — never on the per-call fast
 * path, whose marks stay in memory and travel with the next snapshot. A peer
 * therefore sees a rank as of its last publish: when it created a group, when
 * one of its waits got slow (then every 100 ms), when a call failed, when it
 * left its main function.
 *
 * Ranks of other nodes have no file here: when the job spans nodes, every
 * row a rank writes is also handed to `share` (the network store sends it to
 * the other nodes' ranks), and the rows that arrive from them are kept with
 * `accept`, so a hang report describes every rank of the job.
 *
 * Between writes a rank touches its row's modification time on a timer
 * (startHeartbeat), so readers can tell a rank that is in a long call from one
 * that stopped answering (liveness.ts). On the same timer it shares its row
 * again with the other nodes, and a row of another node counts as seen when
 * it last arrived.
 */
import { readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HEARTBEAT_MS } from './liveness.ts';
import {
  type CallMark,
  type RankSnapshot,
  RankState,
  type RankStateCode,
  type RankStatus,
  type StatusBoard,
} from './status-board.ts';

interface RowFile {
  state: RankStateCode;
  started: CallMark;
  done: CallMark;
  pending: number;
  snapshot: RankSnapshot | undefined;
}

const NO_MARK: CallMark = { seq: -1, op: -1, group: -1, at: 0 };

function isOutOfSpace(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

export function statusFilePath(dir: string, rank: number): string {
  return join(dir, `status-rank${rank}.json`);
}

export class FileStatusBoard implements StatusBoard {
  readonly #own: RowFile = {
    state: RankState.notStarted,
    started: NO_MARK,
    done: NO_MARK,
    pending: 0,
    snapshot: undefined,
  };

  /** The latest rows of ranks on other nodes, as they shared them, and when each arrived. */
  readonly #remote = new Map<number, { row: RowFile; seen: number }>();
  /** This rank's row as last written, which its heartbeat shares again. */
  #text: Uint8Array | undefined;
  /** Sends this rank's row to the ranks of other nodes, when the job spans nodes. */
  share: ((row: Uint8Array) => void) | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  constructor(
    readonly dir: string,
    readonly worldSize: number,
    readonly rank: number,
  ) {}

  /** A row a rank of another node shared; one that does not parse is ignored (the last good one stays). */
  accept(rank: number, row: Uint8Array): void {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.worldSize || rank === this.rank) return;
    try {
      this.#remote.set(rank, { row: JSON.parse(new TextDecoder().decode(row)) as RowFile, seen: Date.now() });
    } catch {
      // Only a status display is at stake: the last good row stays until the peer's next share.
    }
  }

  #check(rank: number, what: string): void {
    // The status board is tensorcomm's own: only a bug in it writes another rank's row.
    if (rank !== this.rank)
      throw new Error(`FileStatusBoard of rank ${this.rank}: cannot ${what} rank ${rank}'s row`);
  }

  callStarted(rank: number, seq: number, op: number, group: number, at: number): void {
    this.#check(rank, 'write');
    this.#own.started = { seq, op, group, at };
    this.#own.pending++;
  }

  callEnded(rank: number, seq: number, op: number, group: number, at: number): void {
    this.#check(rank, 'write');
    this.#own.done = { seq, op, group, at };
    this.#own.pending--;
  }

  setState(rank: number, state: RankStateCode): void {
    this.#check(rank, 'write');
    this.#own.state = state;
    this.#write();
    // A rank that left says so in its row; from then on nobody asks whether it answers.
    if (state === RankState.exited) this.stopHeartbeat();
  }

  /**
   * Touches this rank's row every HEARTBEAT_MS until `stillOwn` says the row is no
   * longer this process's to keep alive, or the rank exits. The timer does not keep
   * the process alive, and runs on the rank's event loop on purpose: a loop that is
   * stuck does not answer its peers either.
   */
  startHeartbeat(stillOwn: () => boolean = () => true): void {
    this.stopHeartbeat();
    this.#heartbeat = setInterval(() => {
      if (!stillOwn()) {
        this.stopHeartbeat();
        return;
      }
      const now = new Date();
      try {
        utimesSync(statusFilePath(this.dir, this.rank), now, now);
      } catch {
        // The job directory is gone (the job ended): nothing left to keep alive.
        this.stopHeartbeat();
        return;
      }
      if (this.#text) this.share?.(this.#text);
    }, HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  stopHeartbeat(): void {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }

  writeSnapshot(rank: number, snapshot: RankSnapshot): void {
    this.#check(rank, 'write');
    this.#own.snapshot = snapshot;
    this.#write();
  }

  /**
   * A full file system keeps the row as last written (the next write tries again): the row is
   * what peers read about this rank, and its failing must not take the place of the error the
   * rank is reporting, which is often that very lack of room.
   */
  #write(): void {
    const file = statusFilePath(this.dir, this.rank);
    const temporary = `${file}.${process.pid}.tmp`;
    const text = JSON.stringify(this.#own);
    try {
      writeFileSync(temporary, text);
      renameSync(temporary, file);
    } catch (error) {
      rmSync(temporary, { force: true });
      if (!isOutOfSpace(error)) throw error;
    }
    this.#text = new TextEncoder().encode(text);
    this.share?.(this.#text);
  }

  /** A row of this node carries `seen`, its file's modification time: the rank's latest heartbeat or write. */
  read(rank: number): RankStatus {
    if (rank === this.rank) return { rank, ...this.#own, seen: Date.now() };
    const shared = this.#remote.get(rank);
    if (shared) return { rank, ...shared.row, seen: shared.seen };
    const file = statusFilePath(this.dir, rank);
    let row: RowFile;
    let seen: number;
    try {
      // Read the time first: a heartbeat after it only makes the row look older, never a stale row newer.
      seen = statSync(file).mtimeMs;
      row = JSON.parse(readFileSync(file, 'utf8')) as RowFile;
    } catch {
      // Not written yet (the rank has not built its context), or mid-creation: nothing known.
      return {
        rank,
        state: RankState.notStarted,
        started: NO_MARK,
        done: NO_MARK,
        pending: 0,
        snapshot: undefined,
      };
    }
    return { rank, ...row, seen };
  }
}
