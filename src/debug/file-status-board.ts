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
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
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

  /** The latest rows of ranks on other nodes, as they shared them. */
  readonly #remote = new Map<number, RowFile>();
  /** Sends this rank's row to the ranks of other nodes, when the job spans nodes. */
  share: ((row: Uint8Array) => void) | undefined;

  constructor(
    readonly dir: string,
    readonly worldSize: number,
    readonly rank: number,
  ) {}

  /** A row a rank of another node shared; one that does not parse is ignored (the last good one stays). */
  accept(rank: number, row: Uint8Array): void {
    if (!Number.isInteger(rank) || rank < 0 || rank >= this.worldSize || rank === this.rank) return;
    try {
      this.#remote.set(rank, JSON.parse(new TextDecoder().decode(row)) as RowFile);
    } catch {}
  }

  #check(rank: number, what: string): void {
    if (rank !== this.rank)
      throw new Error(`FileStatusBoard of rank ${this.rank}: cannot ${what} rank ${rank}'s row`);
  }

  callStarted(rank: number, seq: number, op: number, group: number): void {
    this.#check(rank, 'write');
    this.#own.started = { seq, op, group, at: Date.now() };
    this.#own.pending++;
  }

  callEnded(rank: number, seq: number, op: number, group: number): void {
    this.#check(rank, 'write');
    this.#own.done = { seq, op, group, at: Date.now() };
    this.#own.pending--;
  }

  setState(rank: number, state: RankStateCode): void {
    this.#check(rank, 'write');
    this.#own.state = state;
    this.#write();
  }

  writeSnapshot(rank: number, snapshot: RankSnapshot): void {
    this.#check(rank, 'write');
    this.#own.snapshot = snapshot;
    this.#write();
  }

  #write(): void {
    const file = statusFilePath(this.dir, this.rank);
    const temporary = `${file}.${process.pid}.tmp`;
    const text = JSON.stringify(this.#own);
    writeFileSync(temporary, text);
    renameSync(temporary, file);
    this.share?.(new TextEncoder().encode(text));
  }

  read(rank: number): RankStatus {
    if (rank === this.rank) return { rank, ...this.#own };
    const shared = this.#remote.get(rank);
    if (shared) return { rank, ...shared };
    let row: RowFile;
    try {
      row = JSON.parse(readFileSync(statusFilePath(this.dir, rank), 'utf8')) as RowFile;
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
    return { rank, ...row };
  }
}
