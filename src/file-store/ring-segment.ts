/**
 * A rank's inbox of rings: one shared-memory file per rank of a node
 * (tmp/rings.<rank> in the job directory, a sealed memory file where the
 * system has them: sealed-files.ts) holding a ByteRing for each other
 * rank of the node, which writes into it and nobody else does. The owner
 * creates it with every page reserved (a full /dev/shm is a ShmSpaceError
 * here, never a SIGBUS later) and reads its rings; a peer maps it to write.
 *
 * Layout (little-endian): a 4 KiB header
 *   u32 magic 'TCRS', u32 version, u32 owner rank, u32 rings, u32 ring data bytes,
 *   at byte 64 the owner's `parked` word (1 while any of its waits sleeps on its doorbell),
 *   at byte 128 its `reads peers` word (1 when it can copy from peers' memory: cross-memory.ts),
 * then per ring its control block and data (byte-ring.ts).
 */
import { closeSync } from 'node:fs';
import { ByteRing, RING_CONTROL_BYTES } from '../runtime/byte-ring.ts';
import { FileStoreCorruptError, FileStoreError } from './errors.ts';
import { TMP_DIR } from './file-names.ts';
import { type Mapping, mapFile } from './mapped-file.ts';
import { createMappedJobFile, type MappedJobFile } from './mapped-job-file.ts';
import { asSpaceError } from './reserve-space.ts';
import { openJobFile, removeJobFile } from './sealed-files.ts';

const MAGIC = 0x53524354; // 'TCRS'
const VERSION = 1;
const HEADER_BYTES = 4096;
const PARKED_WORD = 16;
const READS_PEERS_WORD = 32;

export function ringSegmentFile(dir: string, rank: number): string {
  return `${dir}/${TMP_DIR}/rings.${rank}`;
}

export class RingSegment {
  readonly rings: ByteRing[];
  readonly #words: Int32Array;
  readonly #mapping: Mapping;
  /** The owner's file, open until close: a sealed one is reachable only while it is. */
  readonly #owned: { path: string; fd: number } | undefined;
  /** Owner: its waits asleep now (see sleeping). */
  #sleepers = 0;

  private constructor(
    mapping: Mapping,
    rings: number,
    ringBytes: number,
    owned: { path: string; fd: number } | undefined,
  ) {
    this.#mapping = mapping;
    this.#words = new Int32Array(mapping.buffer, 0, HEADER_BYTES / 4);
    this.rings = Array.from(
      { length: rings },
      (_, i) => new ByteRing(mapping.buffer, HEADER_BYTES + i * (RING_CONTROL_BYTES + ringBytes), ringBytes),
    );
    this.#owned = owned;
  }

  /** Creates `rank`'s inbox with `rings` rings of `ringBytes` each, all of it reserved. */
  static create(dir: string, rank: number, rings: number, ringBytes: number): RingSegment {
    const path = ringSegmentFile(dir, rank);
    const bytes = segmentBytes(rings, ringBytes);
    const where = `creating the rings of rank ${rank} (${path})`;
    const taken = (error: unknown) =>
      (error as NodeJS.ErrnoException).code === 'EEXIST'
        ? new FileStoreError(
            `${where}: ${path} exists: another store of rank ${rank} uses this job directory`,
          )
        : asSpaceError(error, dir, bytes, where);
    let made: MappedJobFile;
    try {
      made = createMappedJobFile(dir, path, bytes, 'ring file', where, (buffer) => {
        const header = new DataView(buffer, 0, HEADER_BYTES);
        for (const [i, value] of [MAGIC, VERSION, rank, rings, ringBytes].entries()) {
          header.setUint32(i * 4, value, true);
        }
      });
    } catch (error) {
      throw taken(error);
    }
    return new RingSegment(made.mapping, rings, ringBytes, { path, fd: made.fd });
  }

  /** Maps `rank`'s inbox to write into it; undefined when it does not exist (its store is not open). */
  static open(dir: string, rank: number, rings: number, ringBytes: number): RingSegment | undefined {
    const path = ringSegmentFile(dir, rank);
    const fd = openJobFile(path, 'r+');
    if (fd === undefined) return undefined;
    try {
      const mapping = mapFile(fd, segmentBytes(rings, ringBytes), `ring file ${path}`, true);
      const header = new DataView(mapping.buffer, 0, HEADER_BYTES);
      const found = [0, 1, 2, 3, 4].map((i) => header.getUint32(i * 4, true));
      const expected = [MAGIC, VERSION, rank, rings, ringBytes];
      if (found.some((value, i) => value !== expected[i])) {
        mapping.release();
        throw new FileStoreCorruptError(
          `ring file ${path} is corrupt or from another version: its header holds ` +
            `[${found.join(', ')}], [${expected.join(', ')}] expected`,
        );
      }
      return new RingSegment(mapping, rings, ringBytes, undefined);
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Owner: a wait is about to sleep; writers ring the owner's doorbell from
   * now until every wait that slept has woken (several can sleep at once:
   * one waking must not leave the others unrung).
   */
  sleeping(): void {
    if (this.#sleepers++ === 0) Atomics.store(this.#words, PARKED_WORD, 1);
  }

  /**
   * Owner: a wait that called `sleeping` is awake again, woken or having
   * found what it waited for on its last look. Once none sleeps the word is
   * cleared at once: left set, every burst a peer writes would ring a
   * doorbell nobody listens to until the owner next sleeps (a write system
   * call on the peer's side, an event-loop turn on the owner's).
   */
  awake(): void {
    if (--this.#sleepers === 0) Atomics.store(this.#words, PARKED_WORD, 0);
  }

  /** Writer: whether the owner sleeps on its doorbell (read after publishing a record). */
  isParked(): boolean {
    return Atomics.load(this.#words, PARKED_WORD) === 1;
  }

  /** Owner: says whether it copies large values straight out of its producers' memory. */
  setReadsPeers(reads: boolean): void {
    Atomics.store(this.#words, READS_PEERS_WORD, reads ? 1 : 0);
  }

  /** Writer: whether the owner can take a large value from this process's memory (else: an arena). */
  readsPeers(): boolean {
    return Atomics.load(this.#words, READS_PEERS_WORD) === 1;
  }

  /** Unmaps (a late access reads zeros, see mapped-file.ts) and, for the owner, removes the file. */
  close(): void {
    this.#mapping.release();
    if (this.#owned) removeJobFile(this.#owned.fd, this.#owned.path);
  }
}

function segmentBytes(rings: number, ringBytes: number): number {
  return HEADER_BYTES + rings * (RING_CONTROL_BYTES + ringBytes);
}
