/**
 * FaultInjector: one rank's share of the job's `faults` and `chaos`, asked by
 * every communication call before it starts (ThreadGroup), so failure
 * handling and timing assumptions can be unit-tested. It counts the rank's
 * calls, fires each fault at its call, and keeps delayed calls in order: a
 * call issued while an earlier one is held back waits for it, as it would
 * behind a slow rank, so streams and collective order stay intact.
 */
import type { AbortWord } from '../abort-word.ts';
import { InjectedFaultError } from '../errors.ts';
import { mulberry32 } from '../mulberry32.ts';
import { RankLocal } from '../rank-local.ts';
import { type ChaosOptions, describeFault, type FaultSpec } from './options.ts';

/** What a rank tells its launcher when a fault takes it out, so the job does not count it as failed. */
export type LostHow = 'exit' | 'hang';

export type Injection =
  | { kind: 'throw'; error: InjectedFaultError }
  /** Start the call once `gate` resolves; `ms` is this call's own delay (0 when it only waits behind another). */
  | { kind: 'delay'; gate: Promise<void>; ms: number }
  /** The call never completes; `forever` rejects only once the job is aborted, so the rank can unwind. */
  | { kind: 'hang'; forever: Promise<never> };

const ABORT_POLL_MS = 50;
/** The exit code of a rank an injected `exit` took out. */
export const INJECTED_EXIT_CODE = 70;

interface Armed {
  spec: FaultSpec;
  index: number;
  fired: boolean;
}

export interface InjectorHooks {
  /** The job's abort word: a hung call ends when the job does. */
  abort: AbortWord;
  /** Tells the launcher this rank is lost on purpose (before it exits or hangs). */
  lost(how: LostHow): void;
}

export class FaultInjector {
  readonly #armed: Armed[];
  readonly #hooks: InjectorHooks;
  readonly #random: (() => number) | undefined;
  readonly #maxDelayMs: number;
  #calls = 0;
  readonly #callsOf = new Map<string, number>();
  /** Resolves when the latest held-back call may start; undefined when none is held back. */
  #gate: Promise<void> | undefined;

  /** This rank's injector, or undefined when the job injects nothing into it (the calls' fast path). */
  static forRank(
    rank: number,
    faults: readonly FaultSpec[] | undefined,
    chaos: ChaosOptions | undefined,
    hooks: InjectorHooks,
  ): FaultInjector | undefined {
    const armed = (faults ?? [])
      .map((spec, index) => ({ spec, index, fired: false }))
      .filter((a) => a.spec.rank === rank);
    if (armed.length === 0 && chaos === undefined) return undefined;
    return new FaultInjector(rank, armed, chaos, hooks);
  }

  private constructor(rank: number, armed: Armed[], chaos: ChaosOptions | undefined, hooks: InjectorHooks) {
    this.#armed = armed;
    this.#hooks = hooks;
    // Each rank draws its own sequence from the job's seed: rank r's delays depend on the seed and r only.
    this.#random = chaos ? mulberry32(chaos.seed ^ Math.imul(rank + 1, 0x9e3779b1)) : undefined;
    this.#maxDelayMs = chaos?.maxDelayMs ?? 0;
  }

  /** Counts a call of `op` (`where` names it for errors) and says what to do to it, if anything. */
  next(op: string, where: string): Injection | undefined {
    const nthCall = this.#calls++;
    const nthOfOp = this.#callsOf.get(op) ?? 0;
    this.#callsOf.set(op, nthOfOp + 1);
    let delayMs = this.#random ? this.#random() * this.#maxDelayMs : 0;
    for (const armed of this.#armed) {
      const { spec } = armed;
      if (armed.fired || (spec.op !== undefined && spec.op !== op)) continue;
      if ((spec.op === undefined ? nthCall : nthOfOp) !== (spec.nth ?? 0)) continue;
      armed.fired = true;
      const fault = describeFault(spec, armed.index);
      if (spec.kind === 'throw')
        return { kind: 'throw', error: new InjectedFaultError(`${where}: injected by ${fault}`) };
      if (spec.kind === 'exit') this.#exit();
      if (spec.kind === 'hang') return { kind: 'hang', forever: this.#hang(`${where}: hung by ${fault}`) };
      delayMs += spec.ms ?? 0;
    }
    const gate = delayMs > 0 ? this.#holdBack(delayMs) : this.#gate;
    return gate ? { kind: 'delay', gate, ms: delayMs } : undefined;
  }

  /** Faults of this rank that never fired (the rank made fewer calls than they wait for): a test that tests nothing. */
  unfired(): string[] {
    return this.#armed.filter((a) => !a.fired).map((a) => describeFault(a.spec, a.index));
  }

  #holdBack(delayMs: number): Promise<void> {
    const previous = this.#gate;
    const own = new Promise<void>((resolve) => setTimeout(resolve, delayMs));
    const gate = previous ? Promise.all([previous, own]).then(() => {}) : own;
    this.#gate = gate;
    gate.then(() => {
      if (this.#gate === gate) this.#gate = undefined;
    });
    return gate;
  }

  #exit(): never {
    this.#hooks.lost('exit');
    // In a rank thread this ends the thread, not the process: the launcher sees the rank die.
    process.exit(INJECTED_EXIT_CODE);
  }

  #hang(why: string): Promise<never> {
    this.#hooks.lost('hang');
    const { abort } = this.#hooks;
    return new Promise<never>((_, reject) => {
      // A ref'd timer: the rank must stay alive (and hung) until the job ends it, not drain and exit.
      const poll = setInterval(() => {
        if (!abort.aborted) return;
        clearInterval(poll);
        const error = abort.error()!;
        error.message = `${why}; ended with the job: ${error.message}`;
        reject(error);
      }, ABORT_POLL_MS);
    });
  }
}

const current = new RankLocal<FaultInjector | undefined>(() => undefined);

/** Set by whoever builds the rank's context; every call of the rank asks it. */
export function setRankFaults(injector: FaultInjector | undefined): void {
  current.set(injector);
}

export function rankFaults(): FaultInjector | undefined {
  return current.get();
}
