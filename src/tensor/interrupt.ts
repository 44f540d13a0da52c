/**
 * How long kernels (fill_, copy_, clone over gigabytes) give a job's abort a
 * chance to stop them. A synchronous kernel holds its rank's thread: neither
 * an abort flag nor Worker.terminate() reaches it until it returns, so a rank
 * filling 4 GiB would keep a failed job alive for seconds. The kernels call
 * `checkInterrupt` between chunks; the runtime registers the check (a rank
 * thread's: throw once the job's abort word is up), so this layer imports
 * nothing above it.
 */

/** Elements a kernel processes between two checks: ~16 MiB of int8, a few milliseconds of work. */
export const INTERRUPT_CHUNK_ELEMENTS = 1 << 24;

let registered: (() => void) | undefined;

/** Installs the check this thread's kernels call between chunks (undefined removes it). */
export function registerInterruptCheck(check: (() => void) | undefined): void {
  registered = check;
}

/** Throws what the registered check throws (the job's abort); nothing when none is registered. */
export function checkInterrupt(): void {
  registered?.();
}
