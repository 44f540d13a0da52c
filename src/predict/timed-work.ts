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

/** `known` sees the timing first (to record the call); then the issuer learns it, and catches up if waited. */
export function timedWork<T, C extends CallTiming>(
  issuer: CallIssuer,
  outcome: T | PromiseLike<T>,
  timing: () => C | Promise<C>,
  known: (timing: C) => void,
): Work<T> {
  let settled: C | undefined;
  let waited = false;
  const work = new Work<T>(
    Promise.resolve(outcome).then(async (value) => {
      settled = await timing();
      known(settled);
      issuer.include?.(settled);
      if (waited) issuer.waitFor(settled);
      return value;
    }),
  );
  whenWaitedOn(work as Work<unknown>, () => {
    if (settled === undefined) waited = true;
    else issuer.waitFor(settled);
  });
  return work;
}
