/** What the fuzz knows of one decoder: how to make its valid messages, how to call it, and its own error class. */
import type { Sample } from './mutants.ts';
import type { Rnd } from './random.ts';

export interface DecoderTarget {
  readonly name: string;
  /** The class the decoder documents for malformed input; any other exception is a bug. */
  readonly ownError: new (
    ...args: never[]
  ) => Error;
  /** A valid message made by the real encoder, with its fields. */
  sample(rnd: Rnd): Sample;
  decode(bytes: Uint8Array): unknown;
  /**
   * Makes a mutated message consistent again where the format guards it (a
   * checksum, a declared total length), so mutations reach the checks behind
   * that guard; false when the message is too short to carry it.
   */
  reseal?(bytes: Uint8Array): boolean;
}
