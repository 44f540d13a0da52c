/**
 * Where the job's injected faults meet a ThreadGroup call (see
 * runtime/faults/): a `throw` replaces the call's local checks, so the call
 * fails the way a rejected argument does and its peers are told; a `hang`
 * replaces what the backend would run, so the call stays pending (and shows
 * as pending in hang reports); a delay holds the backend's run back.
 * withFaults returns undefined when nothing is injected into the call (the
 * usual case, which then costs no allocation).
 */
import { rankMonitor } from '../debug/monitor.ts';
import { rankFaults } from '../runtime/faults/injector.ts';

export function withFaults<S, A extends unknown[], T>(
  op: string,
  where: string,
  check: () => S,
  run: (...args: A) => T | Promise<T>,
): [() => S, (...args: A) => T | Promise<T>] | undefined {
  const injection = rankFaults()?.next(op, where);
  if (injection === undefined) return undefined;
  switch (injection.kind) {
    case 'throw':
      return [
        () => {
          throw injection.error;
        },
        run,
      ];
    case 'hang':
      // Published at once: a hung call waits for nothing, so nothing else would show it in peers' hang reports.
      // After the call is among the rank's pending ones (a turn later: a call is, once its run returned).
      return [
        check,
        () =>
          Promise.resolve().then(() => {
            rankMonitor()?.publish();
            return injection.forever;
          }),
      ];
    case 'delay':
      return [check, (...args) => injection.gate.then(() => run(...args))];
  }
}
