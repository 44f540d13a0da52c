/**
 * Runs a decoder on a seeded stream of malformed messages (mutants.ts) and
 * counts the outcomes: accepted, refused with its own error class, or any
 * other exception, which is a bug in the decoder.
 */
import { type Mutant, mutants } from './mutants.ts';
import { mulberry32, type Rnd } from './random.ts';
import type { DecoderTarget } from './target.ts';

export interface Offending {
  readonly hex: string;
  readonly how: string;
  readonly error: string;
}

export interface FuzzReport {
  readonly decoder: string;
  readonly inputs: number;
  readonly accepted: number;
  readonly refused: number;
  readonly foreign: number;
  readonly ms: number;
  /** The longest one input took: a decoder that loops or allocates from a length shows here. */
  readonly slowestMs: number;
  /** The first few inputs that raised a foreign exception. */
  readonly offending: readonly Offending[];
}

const KEPT_OFFENDING = 5;

/** Endless malformed messages for `target`: every mutant of a sample, also resealed, then the next sample. */
export function* fuzzInputs(target: DecoderTarget, rnd: Rnd): Generator<Mutant> {
  for (;;) {
    for (const mutant of mutants(target.sample(rnd), rnd)) {
      yield mutant;
      const resealed = mutant.bytes.slice();
      if (target.reseal?.(resealed)) yield { bytes: resealed, how: `${mutant.how}, resealed` };
    }
  }
}

export function fuzzDecoder(target: DecoderTarget, options: { inputs: number; seed: number }): FuzzReport {
  const inputs = fuzzInputs(target, mulberry32(options.seed));
  const offending: Offending[] = [];
  let accepted = 0;
  let refused = 0;
  let foreign = 0;
  let slowestMs = 0;
  const started = performance.now();
  for (let i = 0; i < options.inputs; i++) {
    const mutant = inputs.next().value as Mutant;
    const before = performance.now();
    try {
      target.decode(mutant.bytes);
      accepted++;
    } catch (error) {
      if (error instanceof target.ownError) refused++;
      else if (foreign++ < KEPT_OFFENDING) offending.push(describe(mutant, error));
    }
    slowestMs = Math.max(slowestMs, performance.now() - before);
  }
  const ms = performance.now() - started;
  return {
    decoder: target.name,
    inputs: options.inputs,
    accepted,
    refused,
    foreign,
    ms,
    slowestMs,
    offending,
  };
}

function describe(mutant: Mutant, error: unknown): Offending {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { hex: Buffer.from(mutant.bytes).toString('hex'), how: mutant.how, error: text };
}
