/** Teardown that releases everything it can even when one release fails. */

/** Runs every step; throws the first error once all have run. */
export function runAll(steps: Iterable<() => void>): void {
  let first: { error: unknown } | undefined;
  for (const step of steps) {
    try {
      step();
    } catch (error) {
      first ??= { error };
    }
  }
  if (first) throw first.error;
}
