/**
 * Names of the files one key uses in a job directory. A key's files share its
 * "topic" (the encoded key between the first and second dot); a directory
 * event is routed by the file's "channel", its kind letter and topic, so a
 * consumer waiting for a value is not woken by claims and finish markers, nor
 * a producer waiting for finish markers by claims:
 *   v.<topic>                 the published value (header + payload)
 *   c.<topic>.<gen>.<slot>    a consumer's claim of one of the value's gets
 *   d.<topic>.<gen>.<slot>    that consumer's finish (empty, or its error)
 * `gen` names one publication, so files of a reused key never mix values.
 * Temporary files live in tmp/, which is not watched, and so do the
 * producers' shared arenas (tmp/arena.<rank>.<nonce>.<index>), which live as
 * long as their store.
 */
import { createHash } from 'node:crypto';
import { MAX_KEY_BYTES } from '../memory-store/slot-table.ts';

export const TMP_DIR = 'tmp';
export const ABORT_FILE = 'abort';
/** Longer encodings are replaced by a digest; the header still carries the full key. */
const MAX_TOPIC_CHARS = 160;

/** A filename-safe, dot-free spelling of the key. */
export function topicOf(key: string, where: () => string): string {
  const length = Buffer.byteLength(key);
  if (length === 0 || length > MAX_KEY_BYTES) {
    throw new RangeError(`${where()}: key must be 1..${MAX_KEY_BYTES} bytes of UTF-8, got ${length}`);
  }
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

/** The channel ('v.<topic>', 'c.<topic>' or 'd.<topic>') of a directory entry, or undefined for files that are not a key's. */
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
    return `${this.dir}/c.${this.topic}.${gen}.${slot}`;
  }

  done(gen: string, slot: number): string {
    return `${this.dir}/d.${this.topic}.${gen}.${slot}`;
  }
}

/** A producer's shared arena file: its rank, its store's nonce and the arena's number. */
export function arenaFile(dir: string, rank: number, nonce: number, index: number): string {
  return `${dir}/${TMP_DIR}/arena.${rank}.${nonce.toString(16)}.${index}`;
}
