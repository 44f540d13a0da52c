/**
 * A process rank that exits while its context is still open (process.exit(0)
 * in the middle of its main, or an event loop that ran dry mid-call) leaves
 * its peers waiting for calls it will never make, and an exit code of 0 tells
 * nobody. Node runs 'exit' listeners synchronously even on process.exit, so
 * the rank records how it left in its node's job directory; whoever watches
 * it (its launcher, or the peers' pid watch) reads the record and fails the
 * job at once, naming the rank, its exit code and the calls it left. A rank
 * killed by a signal writes nothing: its launcher sees the signal, a pid
 * watch that it is gone.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface EarlyExit {
  /** The process's exit code. */
  code: number;
  /** The calls it had started and not finished, as messages name them. */
  calls: string[];
}

export function earlyExitPath(dir: string, rank: number): string {
  return join(dir, `exit-rank${rank}.json`);
}

/** Synchronous, for an 'exit' listener; a job directory already gone (the job ended) is no error. */
export function recordEarlyExit(dir: string, rank: number, exit: EarlyExit): void {
  try {
    writeFileSync(earlyExitPath(dir, rank), JSON.stringify(exit));
  } catch {
    // An exiting process has no one to tell: the launcher then goes by the exit code alone.
  }
}

/** The record of a rank that left with its context open; undefined if it left none (or it does not parse). */
export function readEarlyExit(dir: string, rank: number): EarlyExit | undefined {
  try {
    const exit = JSON.parse(readFileSync(earlyExitPath(dir, rank), 'utf8')) as EarlyExit;
    return Number.isInteger(exit.code) && Array.isArray(exit.calls) ? exit : undefined;
  } catch {
    return undefined;
  }
}

/** `exited with code 0 before its main finished (its context was still open), in allReduce(…) call #0 on group "world"`. */
export function describeEarlyExit(exit: EarlyExit): string {
  // With checks, flight recorder and trace all off the monitor sees no calls: none listed is not "in none".
  const during = exit.calls.length > 0 ? `, in ${exit.calls.join(', ')}` : '';
  return (
    `exited with code ${exit.code} before its main finished (its context was still open: ` +
    `a script must await ctx.close() before process.exit)${during}`
  );
}
