/**
 * The clock of one call of a layer above ThreadGroup (a p2p message, a
 * DTensor redistribute, a weight sync) in predict mode.
 *
 * Such a call makes ThreadGroup calls of its own and waits on them (await,
 * then, Promise.all) as its code goes, often while the program goes on.
 * Those waits are not the program's: were the calls issued at, and their
 * waits to move, the rank's clock, it would move when the layer's code
 * happens to run in real time, between the program's own compute and waits,
 * and the same program would be predicted differently from run to run. So the
 * layer's calls are issued at a clock of the layer call's own, forked from
 * its issuer's (the rank's, or an enclosing layer call's) as the call is made,
 * which only its own waits move; the program waits on the layer call's Work,
 * and there its issuer catches up with the layer call's end. The layer call
 * lasts from its calls' first start to their last end.
 *
 * A layer marks the ThreadGroup calls it makes for a layer call with `run`,
 * around the code that makes them (each part of a message, each step of a
 * redistribute), and returns `settle`'s Work. Where the rank does not
 * predict, `layerCall()` gives UNTIMED, which does nothing.
 */
import type { Work } from '../runtime/work.ts';
import { type CallIssuer, type CallTiming, rankClock } from './rank-clock.ts';
import { timedWork } from './timed-work.ts';

export interface LayerCall {
  /** The rank's virtual time when the layer call was made (µs); undefined where the rank does not predict. */
  readonly issuedUs: number | undefined;
  /**
   * Runs `fn`: the ThreadGroup calls it makes are this layer call's. With
   * `arrivalUs`, the sends it makes arrive then (an emulated link's time,
   * p2p/netem/) instead of after the topology's transfer.
   */
  run<T>(fn: () => T, arrivalUs?: number): T;
  /**
   * What the layer returns for the call: `outcome` where the rank does not predict, else a Work of
   * it whose issuer catches up with the layer call's end where it is waited on.
   */
  settle<T>(outcome: Work<T>): Work<T>;
  settle<T>(outcome: Promise<T>): Promise<T>;
  /**
   * A layer call within this one, for a task this one runs beside its others (a weight sync's
   * transfer of one bucket): issued at this one's clock, its own waits move only its clock, and
   * this one's clock catches up with its end where this one waits on it.
   */
  fork(): LayerCall;
}

/** What runs now inside a layer call's `run`. */
let running: { clock: LayerClock; arrivalUs: number | undefined } | undefined;

class LayerClock implements LayerCall, CallIssuer {
  readonly issuedUs: number;
  readonly #issuer: CallIssuer;
  #now: number;
  /** The times of the calls it made (a layer call within it counts as one). */
  readonly #calls: CallTiming[] = [];

  constructor(issuer: CallIssuer) {
    this.#issuer = issuer;
    this.issuedUs = this.#now = issuer.now();
  }

  now(): number {
    return this.#now;
  }

  /**
   * A layer call posts its receives as it starts: each completes when its message arrives. Its code
   * posts them as it goes, in an order (and so at clock readings) that can be the real run's race
   * (a weight sync's receiver takes headers and payloads on chains of their own).
   */
  postedUs(): number {
    return this.issuedUs;
  }

  waitFor({ endUs }: CallTiming): void {
    if (endUs > this.#now) this.#now = endUs;
  }

  include(timing: CallTiming): void {
    this.#calls.push(timing);
  }

  run<T>(fn: () => T, arrivalUs?: number): T {
    const outer = running;
    running = { clock: this, arrivalUs };
    try {
      return fn();
    } finally {
      running = outer;
    }
  }

  settle<T>(outcome: Promise<T>): Work<T> {
    return timedWork(
      this.#issuer,
      outcome,
      () => this.#span(),
      () => {},
    );
  }

  fork(): LayerCall {
    return new LayerClock(this);
  }

  /**
   * From its calls' first start to their last end (or its own last wait), busy
   * while one of them was in flight; a layer call that made none took no time.
   */
  #span(): CallTiming {
    const calls = [...this.#calls].sort((a, b) => a.startUs - b.startUs);
    if (calls.length === 0) return { startUs: this.issuedUs, endUs: this.#now };
    const endUs = calls.reduce((end, c) => Math.max(end, c.endUs), this.#now);
    return { startUs: calls[0].startUs, endUs, busyUs: (fromUs) => coveredUs(calls, fromUs, endUs) };
  }
}

/** How much of [fromUs, toUs] lies within one of `calls` (sorted by start). */
function coveredUs(calls: readonly CallTiming[], fromUs: number, toUs: number): number {
  let covered = 0;
  let reached = fromUs;
  for (const { startUs, endUs } of calls) {
    const start = Math.max(startUs, reached);
    const end = Math.min(endUs, toUs);
    if (end > start) {
      covered += end - start;
      reached = end;
    }
  }
  return covered;
}

/** No layer call of its own: `run` leaves its calls to whoever issues them now, and `settle` changes nothing. */
export const UNTIMED: LayerCall = {
  issuedUs: undefined,
  run: (fn) => fn(),
  settle: <P>(outcome: P) => outcome,
  fork: () => UNTIMED,
};

/** A layer call made now: its own clock where the rank predicts (and its main has not returned), else UNTIMED. */
export function layerCall(): LayerCall {
  const rank = rankClock();
  return rank && !rank.stopped ? new LayerClock(running?.clock ?? rank) : UNTIMED;
}

/**
 * `target` (a layer's ThreadGroup) with each method call made in the layer call `current()` gives:
 * for a layer whose calls are made all through code of its own (weight-sync/). `target` itself where
 * the rank does not predict.
 */
export function callsIn<T extends object>(target: T, current: () => LayerCall): T {
  if (rankClock() === undefined) return target;
  return new Proxy(target, {
    get(t, prop) {
      const value = Reflect.get(t, prop, t);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => current().run(() => Reflect.apply(value, t, args));
    },
  });
}

/** Who issues a ThreadGroup call made now on this rank: the layer call running it, else the rank itself. */
export function callIssuer(rank: CallIssuer): CallIssuer {
  return running?.clock ?? rank;
}

/** When the sends made now arrive, where an emulated link decides it (µs); undefined: the topology does. */
export function emulatedArrivalUs(): number | undefined {
  return running?.arrivalUs;
}
