/**
 * The `faults` and `chaos` job options (spawnThreads, rankTest): what to
 * inject into which rank's calls, checked once by the launcher so every rank
 * gets a plan it can trust. See docs/guides/testing.md.
 */

export type FaultKind = 'throw' | 'exit' | 'hang' | 'delay';

export interface FaultSpec {
  /** The global rank whose call fails. */
  rank: number;
  /** Count only calls of this op (ThreadGroup's op names: allReduce, send, recv, …); else every communication call. */
  op?: string;
  /** Which of those calls, 0-based (default 0: the first). */
  nth?: number;
  /**
   * `throw`: that call rejects with an InjectedFaultError (its peers are told, as for a failed local check);
   * `exit`: the rank dies as if it crashed; `hang`: the call never completes; `delay`: it starts `ms` later.
   */
  kind: FaultKind;
  /** The delay of a `delay` fault, in milliseconds. */
  ms?: number;
}

export interface ChaosOptions {
  /** The same seed gives every rank the same delays, call by call. */
  seed: number;
  /** Each communication call starts after a random delay in [0, maxDelayMs). */
  maxDelayMs: number;
}

const KINDS: readonly FaultKind[] = ['throw', 'exit', 'hang', 'delay'];
const FAULT_KEYS = ['rank', 'op', 'nth', 'kind', 'ms'];
const CHAOS_KEYS = ['seed', 'maxDelayMs'];
/** Longer than any test should wait on purpose; a larger value is a unit mistake (seconds for ms). */
const MAX_DELAY_MS = 600_000;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkKeys(value: Record<string, unknown>, known: readonly string[], where: string): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new TypeError(`${where}: unknown key "${key}" (known: ${known.join(', ')})`);
    }
  }
}

function checkDelay(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_DELAY_MS) {
    throw new RangeError(
      `${where} must be a number of milliseconds in (0, ${MAX_DELAY_MS}], got ${String(value)}`,
    );
  }
  return value;
}

/**
 * The faults of a job, checked: every entry an object of known keys, `rank`
 * a rank of the job, `op` one of `ops`, `nth` a non-negative integer, `ms`
 * given exactly for delays. Errors name the entry and the key.
 */
export function checkFaults(
  faults: unknown,
  job: { worldSize: number; ops: readonly string[] },
  where: string,
): FaultSpec[] | undefined {
  if (faults === undefined) return undefined;
  if (!Array.isArray(faults)) throw new TypeError(`${where}: faults must be an array, got ${typeof faults}`);
  return faults.map((fault, i) => {
    const at = `${where}: faults[${i}]`;
    if (!isRecord(fault)) throw new TypeError(`${at} must be an object { rank, op?, nth?, kind, ms? }`);
    checkKeys(fault, FAULT_KEYS, at);
    const { rank, op, nth = 0, kind, ms } = fault;
    if (!Number.isInteger(rank) || (rank as number) < 0 || (rank as number) >= job.worldSize) {
      throw new RangeError(
        `${at}.rank must be a rank of the job (0..${job.worldSize - 1}), got ${String(rank)}`,
      );
    }
    if (op !== undefined && (typeof op !== 'string' || !job.ops.includes(op))) {
      throw new RangeError(
        `${at}.op ${JSON.stringify(op)} is not a communication call; one of: ${job.ops.join(', ')}`,
      );
    }
    if (!Number.isSafeInteger(nth) || (nth as number) < 0) {
      throw new RangeError(
        `${at}.nth must be a non-negative integer (0 is the first call), got ${String(nth)}`,
      );
    }
    if (!KINDS.includes(kind as FaultKind)) {
      throw new RangeError(
        `${at}.kind must be one of ${KINDS.map((k) => `'${k}'`).join(', ')}, got ${JSON.stringify(kind)}`,
      );
    }
    if (kind === 'delay') checkDelay(ms, `${at}.ms`);
    else if (ms !== undefined)
      throw new TypeError(`${at}.ms is only for kind 'delay' (this fault is '${kind}')`);
    const spec: FaultSpec = { rank: rank as number, nth: nth as number, kind: kind as FaultKind };
    if (op !== undefined) spec.op = op as string;
    if (ms !== undefined) spec.ms = ms as number;
    return spec;
  });
}

export function checkChaos(chaos: unknown, where: string): ChaosOptions | undefined {
  if (chaos === undefined) return undefined;
  const at = `${where}: chaos`;
  if (!isRecord(chaos)) throw new TypeError(`${at} must be an object { seed, maxDelayMs }`);
  checkKeys(chaos, CHAOS_KEYS, at);
  const { seed, maxDelayMs } = chaos;
  if (!Number.isSafeInteger(seed)) throw new RangeError(`${at}.seed must be an integer, got ${String(seed)}`);
  return { seed: seed as number, maxDelayMs: checkDelay(maxDelayMs, `${at}.maxDelayMs`) };
}

/** `faults[2] (rank 1, nth 3 of its allReduce calls, exit)`: a fault as messages name it. */
export function describeFault(fault: FaultSpec, index: number): string {
  const calls = fault.op === undefined ? 'communication calls' : `${fault.op} calls`;
  const kind = fault.kind === 'delay' ? `delay ${fault.ms} ms` : fault.kind;
  return `faults[${index}] (rank ${fault.rank}, nth ${fault.nth ?? 0} of its ${calls}, ${kind})`;
}
