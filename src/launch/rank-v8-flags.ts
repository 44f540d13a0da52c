/**
 * V8 flags a node's rank processes start with. V8 compiles a hot function's
 * optimized code on threads of its own while the function goes on running
 * unoptimized. Where the node's ranks take every core (their waits spin:
 * runtime/spin-policy.ts), those threads find no core free, the compiled code
 * comes late, and a fresh job's first few thousand calls run slow code for
 * longer; each rank then compiles on its own thread instead, as it goes.
 * Measured on 2 rank processes of a 2-core machine, a 4 B round trip over a
 * fresh job's first 3,000: 53 µs instead of 64 on Node 20, 46 instead of 60
 * on Node 26; warm calls, start-up and oversubscribed jobs unchanged. A
 * machine with cores to spare keeps V8's default.
 */
import { availableParallelism } from 'node:os';

/** A user's own choice, in the ranks' NODE_OPTIONS, wins. */
const USER_CHOICE = /--(no-)?concurrent[-_]recompilation\b/;

export function rankV8Flags(
  localRanks: number,
  nodeOptions: string | undefined,
  cores: number = availableParallelism(),
): string[] {
  if (localRanks < cores || USER_CHOICE.test(nodeOptions ?? '')) return [];
  return ['--no-concurrent-recompilation'];
}
