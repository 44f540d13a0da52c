/**
 * A rank's virtual clock in predict mode. It moves only where the program
 * says: declared compute (`ctx.predict.compute(us)`) and waits on calls whose
 * predicted end lies ahead of it. Real time never enters, so the same program
 * on the same topology gives the same numbers on any machine under any load.
 *
 * A call is issued at the rank's clock; its start (the latest member's issue,
 * after the group's previous collective) and end come from the exchange the
 * group makes (thread-group/predicted-calls.ts); the rank's clock catches up
 * with the end only where the program waits on the call, so a call's time
 * overlaps whatever the rank declares between issuing and awaiting it.
 */
import { RankLocal } from '../runtime/rank-local.ts';
import type { PredictedCall, PredictedRank } from './report.ts';
import type { Topology } from './topology.ts';

/** What a rank's code sees as `ctx.predict`. */
export interface PredictClock {
  /** This rank computes for `us` microseconds: its clock moves on by that much. */
  compute(us: number): void;
  /** This rank's clock: microseconds of virtual time since the job started. */
  now(): number;
}

/** A call's predicted place in time, once its group's exchange told its start. */
export interface CallTiming {
  startUs: number;
  endUs: number;
  /**
   * How much of [fromUs, endUs] the call was communicating, for a call with
   * gaps (a layer call's, layer-clock.ts: between its calls it waits for its
   * peers); absent: all of it from its start.
   */
  busyUs?(fromUs: number): number;
}

/**
 * Calls a rank's report lists at most (a long job's totals stay exact; the
 * calls past this are counted, not kept, so a job's calls cannot grow the
 * rank's memory without bound).
 */
export const MAX_REPORTED_CALLS = 100_000;

/**
 * What issues a ThreadGroup call in predict mode: the call starts at its
 * `now()`, and where the call is waited on, `waitFor` catches it up with the
 * call's end. The rank's clock, or the clock of a layer's call above
 * ThreadGroup (layer-clock.ts), which also learns the times of the calls it
 * issued (`include`) to know when it ran itself, and posts its receives at
 * `postedUs()` rather than `now()`.
 */
export interface CallIssuer {
  now(): number;
  waitFor(timing: CallTiming): void;
  include?(timing: CallTiming): void;
  postedUs?(): number;
}

export class RankClock implements PredictClock, CallIssuer {
  readonly rank: number;
  /** What the calls are predicted on. */
  readonly topology: Topology;
  #now = 0;
  #computeUs = 0;
  #commUs = 0;
  #exposedUs = 0;
  #waitUs = 0;
  readonly #calls: PredictedCall[] = [];
  readonly #maxCalls: number;
  #droppedCalls = 0;
  /** No more calls are predicted: the rank's main returned (its close's own messages are not the program's). */
  #stopped = false;

  constructor(rank: number, topology: Topology, maxCalls = MAX_REPORTED_CALLS) {
    this.rank = rank;
    this.topology = topology;
    this.#maxCalls = maxCalls;
  }

  compute(us: number): void {
    if (typeof us !== 'number' || !Number.isFinite(us) || us < 0) {
      throw new RangeError(`ctx.predict.compute: us must be a finite number ≥ 0, got ${String(us)}`);
    }
    this.#now += us;
    this.#computeUs += us;
  }

  now(): number {
    return this.#now;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  stop(): void {
    this.#stopped = true;
  }

  /** Records a call with its predicted times; its time counts as communication whether or not it is exposed. */
  record(call: Omit<PredictedCall, 'rank'>): void {
    this.#commUs += call.endUs - call.startUs;
    if (this.#calls.length < this.#maxCalls) this.#calls.push({ rank: this.rank, ...call });
    else this.#droppedCalls++;
  }

  /**
   * The program waits on a call: its clock catches up with the call's end. Of
   * the time it waits, the part before the call started (or, for a layer call,
   * when none of its calls was in flight) is waiting for the members that came
   * later (stragglers), the rest is exposed communication.
   */
  waitFor(timing: CallTiming): void {
    const from = this.#now;
    const { startUs, endUs } = timing;
    if (endUs <= from) return;
    const exposed = timing.busyUs ? timing.busyUs(from) : endUs - Math.max(from, Math.min(startUs, endUs));
    this.#waitUs += endUs - from - exposed;
    this.#exposedUs += exposed;
    this.#now = endUs;
  }

  totals(): PredictedRank {
    return {
      rank: this.rank,
      endUs: this.#now,
      computeUs: this.#computeUs,
      commUs: this.#commUs,
      exposedCommUs: this.#exposedUs,
      waitUs: this.#waitUs,
      ...(this.#droppedCalls > 0 && { droppedCalls: this.#droppedCalls }),
    };
  }

  calls(): readonly PredictedCall[] {
    return this.#calls;
  }
}

const current = new RankLocal<RankClock | undefined>(() => undefined);

/** The clock of the rank this thread runs, when its job predicts (set by its context). */
export function rankClock(): RankClock | undefined {
  return current.get();
}

export function setRankClock(clock: RankClock | undefined): void {
  current.set(clock);
}
