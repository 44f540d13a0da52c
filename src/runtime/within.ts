/**
 * A promise of work that has no timeout of its own (a bundler's build, a
 * child's answer), given one: it rejects with `what` named once `ms` pass,
 * after `giveUp` is told to stop the work.
 */
export async function within<T>(
  work: Promise<T>,
  ms: number,
  what: string,
  giveUp?: () => unknown,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      giveUp?.();
      // Its one caller (rank-bundle.ts) notes the failure and loads the ranks unbundled: nobody else sees it.
      reject(new Error(`${what} took over ${ms / 1000} s`));
    }, ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
