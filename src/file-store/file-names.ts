/**
 * Names of the files one key uses in a job directory. A key's files share its
 * "topic" (the encoded key between the first and second dot):
 *   v.<topic>                          the published value (header + payload)
 *   claims/c.<topic>.<gen>.<slot>      a consumer's claim of one of the value's gets
 *   done/<producer>/d.<topic>.<gen>.<slot>  that consumer's finish (empty, or its error)
 * `gen` names one publication, so files of a reused key never mix values.
 * Every store watches the job directory (values, the abort flag) and its own
 * done/<rank>/ (finishes of its values); claims/ is not watched. So a wake-up
 * (a context switch, the dearest part of a small handshake on a loaded
 * machine) comes only from a file its store may be waiting for. A directory
 * event is routed by the file's "channel", its kind letter and topic.
 * Temporary files live in tmp/, which is not watched, and so do the
 * producers' shared arenas (tmp/arena.<rank>.<nonce>.<index>), which live as
 * long as their store, and node regions (tmp/region.<topic>.<owner>,
 * node-region.ts). Files that ranks map (arenas, ring files, regions, large
 * values) are links to sealed memory files where the system has them
 * (sealed-files.ts).
 */
import { createHash } from 'node:crypto';
import { encodeKey } from '../runtime/store-limits.ts';

export const TMP_DIR = 'tmp';
export const CLAIMS_DIR = 'claims';
export const DONE_DIR = 'done';
export const ABORT_FILE = 'abort';
/** Longer encodings are replaced by a digest; the header still carries the full key. */
const MAX_TOPIC_CHARS = 160;

/** A filename-safe, dot-free spelling of the key. */
export function topicOf(key: string, where: () => string): string {
  encodeKey(key, where);
  let topic: string;
  try {
    topic = encodeURIComponent(key).replace(/[.!~*'()]/g, (c) => `%${c.charCodeAt(0).toString(16)}`);
  } catch {
    throw new TypeError(`${where()}: key is not valid Unicode`);
  }
  // '~' never survives the encoding above, so a digest cannot collide with a plain key.
  if (topic.length > MAX_TOPIC_CHARS) topic = `~${createHash('sha256').update(key).digest('hex')}`;
  return topic;
}

/** The channel ('v.<topic>' or 'd.<topic>') of a directory entry, or undefined for files that are not a key's. */
export function channelOfFile(name: string): string | undefined {
  if (name.length < 3 || name[1] !== '.') return undefined;
  const end = name.indexOf('.', 2);
  return end < 0 ? name : name.slice(0, end);
}

/** Paths are concatenated rather than path.join'ed: this runs several times per handshake. */
export class KeyFiles {
  readonly value: string;
  /** Where the value's publication and removal are announced. */
  readonly valueChannel: string;
  /** Where consumers' finish markers are announced. */
  readonly doneChannel: string;

  constructor(
    readonly dir: string,
    readonly topic: string,
  ) {
    this.value = `${dir}/v.${topic}`;
    this.valueChannel = `v.${topic}`;
    this.doneChannel = `d.${topic}`;
  }

  claim(gen: string, slot: number): string {
    return `${this.dir}/${CLAIMS_DIR}/c.${this.topic}.${gen}.${slot}`;
  }

  done(producerRank: number, gen: string, slot: number): string {
    return `${doneDir(this.dir, producerRank)}/d.${this.topic}.${gen}.${slot}`;
  }
}

/** Where consumers put their finish markers of `producerRank`'s values; only that producer watches it. */
export function doneDir(dir: string, producerRank: number): string {
  return `${dir}/${DONE_DIR}/${producerRank}`;
}

/** A producer's shared arena file: its rank, its store's nonce and the arena's number. */
export function arenaFile(dir: string, rank: number, nonce: number, index: number): string {
  return `${dir}/${TMP_DIR}/arena.${rank}.${nonce.toString(16)}.${index}`;
}
