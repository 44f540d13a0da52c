/**
 * Work a rank's call goes on doing after the call itself has answered: a call
 * that failed its own checks rejects at once and tells its peers in the
 * background. The rank's close waits for these errands, so a rank that returns
 * (or throws) right away does not cut the message short. Each errand is
 * bounded by its own timeout.
 */
import { RankLocal } from './rank-local.ts';

/** This rank's errands (a thread running several ranks keeps each one's apart). */
const errands = new RankLocal(() => new Set<Promise<void>>());

/** Keeps `errand` until it settles; its outcome is nobody's (a failure to tell peers surfaces as their timeout). */
export function runErrand(errand: Promise<unknown>): void {
  const running = errands.get();
  const kept: Promise<void> = errand.then(
    () => void running.delete(kept),
    () => void running.delete(kept),
  );
  running.add(kept);
}

/** Settles once every errand started so far has. */
export async function errandsDone(): Promise<void> {
  const running = errands.get();
  while (running.size > 0) await Promise.all(running);
}
