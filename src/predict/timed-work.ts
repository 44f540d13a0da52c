/**
 * A predicted call's Work: a ThreadGroup call's (thread-group/predicted-calls.ts)
 * or a layer call's above it (layer-clock.ts). Its timing is known only once
 * the call's exchange (or its own calls) told it, so the Work settles when the
 * call's outcome and its timing both are. Where the Work is waited on, before
 * or after it settles, the clock that issued the call catches up with its end:
 * a wait before the timing is known is kept and applied as the Work settles,
 * so the code that waited sees the clock caught up when it resumes.
 */
import { Work, whenWaitedOn } from '../runtime/work.ts';
import type { CallIssuer, CallTiming } from './rank-clock.ts';

/**
 * `timing` is asked once the outcome resolved: its value, or a promise of it. `known` sees the timing
 * first (to record the call); then the issuer learns it, and catches up if waited.
 */
export function timedWork<T, C extends CallTiming>(
  issuer: CallIssuer,
  outcome: T | PromiseLike<T>,
  timing: () => C | Promise<C>,
  known: (timing: C) => void,
): Work<T> {
  let settled: C | undefined;
  let waited = false;
  const learn = (value: T, t: C): T => {
    settled = t;
    known(t);
    issuer.include?.(t);
    if (waited) issuer.waitFor(t);
    return value;
  };
  // A timing known as the outcome settles is learnt in the same turn: no promise between the call and its caller.
  const work = new Work<T>(
    Promise.resolve(outcome).then((value) => {
      const t = timing();
      return t instanceof Promise ? t.then((s) => learn(value, s)) : learn(value, t);
    }),
  );
  whenWaitedOn(work as Work<unknown>, () => {
    if (settled === undefined) waited = true;
    else issuer.waitFor(settled);
  });
  return work;
}
