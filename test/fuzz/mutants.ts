/**
 * The malformed messages made from one valid message, the same way for every
 * decoder: each field set to each of its edge values, the message cut at
 * every byte, several fields at their edges together, random stacks of bit
 * flips, byte overwrites, field edges, insertions and deletions, and random
 * bytes.
 */
import { edgeValues, type Field, writeField } from './fields.ts';
import { int, pick, type Rnd, randomBytes } from './random.ts';

/** A valid message, as its encoder wrote it, and where its fields lie. */
export interface Sample {
  readonly bytes: Uint8Array;
  readonly fields: readonly Field[];
}

/** A message to decode and how it was made from its sample (shown for an input that fails). */
export interface Mutant {
  readonly bytes: Uint8Array;
  readonly how: string;
}

/** Random stacks of mutations per sample (of field edges, and of any kind), beside the systematic ones. */
const STACKED_PER_SAMPLE = 24;
const MAX_STACK = 4;
/** Most bytes one insertion adds or one deletion removes. */
const MAX_SPLICE = 8;

export function* mutants(sample: Sample, rnd: Rnd): Generator<Mutant> {
  // A plain copy: a Buffer's slice() is a view, and the mutations below would write into the sample.
  const bytes = new Uint8Array(sample.bytes);
  const { fields } = sample;
  for (const field of fields) {
    for (const value of edgeValues(bytes, field)) {
      const out = bytes.slice();
      writeField(out, field, value);
      yield { bytes: out, how: `${field.name} = ${value}` };
    }
  }
  for (let length = 0; length < bytes.length; length++) {
    yield { bytes: bytes.slice(0, length), how: `cut to ${length} bytes` };
  }
  for (let i = 0; i < STACKED_PER_SAMPLE && fields.length > 1; i++) yield fieldsAtEdges(bytes, fields, rnd);
  for (let i = 0; i < STACKED_PER_SAMPLE; i++) yield stacked(bytes, fields, rnd);
  yield { bytes: randomBytes(rnd, int(rnd, 2 * bytes.length + 1)), how: 'random bytes' };
  // Past a magic number, so random bytes reach the decoder's later checks.
  const noise = randomBytes(rnd, bytes.length);
  noise.set(bytes.subarray(0, 4));
  yield { bytes: noise, how: 'random bytes after the first 4' };
}

/**
 * Two to MAX_STACK fields at random edges at once: a decoder may check each
 * field against the message alone and miss what two together declare (a
 * count that fits only while the bytes after it keep their length).
 */
function fieldsAtEdges(bytes: Uint8Array, fields: readonly Field[], rnd: Rnd): Mutant {
  const out = bytes.slice();
  const chosen = new Set<Field>();
  const wanted = Math.min(2 + int(rnd, MAX_STACK - 1), fields.length);
  while (chosen.size < wanted) chosen.add(pick(rnd, fields));
  const steps = [...chosen].map((field) => {
    const value = pick(rnd, edgeValues(out, field));
    writeField(out, field, value);
    return `${field.name} = ${value}`;
  });
  return { bytes: out, how: steps.join(', ') };
}

/** One to MAX_STACK random mutations applied in turn. */
function stacked(bytes: Uint8Array, fields: readonly Field[], rnd: Rnd): Mutant {
  let out: Uint8Array = bytes.slice();
  const steps: string[] = [];
  for (let n = 1 + int(rnd, MAX_STACK); n > 0; n--) {
    const step = mutateOnce(out, fields, rnd);
    out = step.bytes;
    steps.push(step.how);
  }
  return { bytes: out, how: steps.join(', ') };
}

/** A mutation of `bytes` (which it may change in place), or `bytes` untouched when none applies. */
function mutateOnce(bytes: Uint8Array, fields: readonly Field[], rnd: Rnd): Mutant {
  const at = int(rnd, bytes.length + 1);
  switch (int(rnd, 6)) {
    case 0: {
      if (at === bytes.length) break;
      const bit = int(rnd, 8);
      bytes[at] ^= 1 << bit;
      return { bytes, how: `bit ${bit} of byte ${at} flipped` };
    }
    case 1: {
      if (at === bytes.length) break;
      bytes[at] = int(rnd, 256);
      return { bytes, how: `byte ${at} = ${bytes[at]}` };
    }
    case 2: {
      const field = fields.length > 0 ? pick(rnd, fields) : undefined;
      if (field === undefined || field.at + field.width > bytes.length) break;
      const value = pick(rnd, edgeValues(bytes, field));
      writeField(bytes, field, value);
      return { bytes, how: `${field.name} = ${value}` };
    }
    case 3: {
      const inserted = randomBytes(rnd, 1 + int(rnd, MAX_SPLICE));
      const out = new Uint8Array(bytes.length + inserted.length);
      out.set(bytes.subarray(0, at));
      out.set(inserted, at);
      out.set(bytes.subarray(at), at + inserted.length);
      return { bytes: out, how: `${inserted.length} bytes inserted at ${at}` };
    }
    case 4: {
      const removed = Math.min(1 + int(rnd, MAX_SPLICE), bytes.length - at);
      const out = new Uint8Array(bytes.length - removed);
      out.set(bytes.subarray(0, at));
      out.set(bytes.subarray(at + removed), at);
      return { bytes: out, how: `${removed} bytes removed at ${at}` };
    }
    default:
      return { bytes: bytes.slice(0, at), how: `cut to ${at} bytes` };
  }
  return { bytes, how: 'unchanged' };
}
