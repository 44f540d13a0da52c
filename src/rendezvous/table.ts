/**
 * The rendezvous server's state, apart from its sockets: the key-value map,
 * the get/wait calls parked on missing keys, and the barriers in progress.
 * Every parked call has its own deadline and belongs to an owner (a
 * connection), so a connection that goes away takes its waiters with it.
 * What it holds (values with their keys, parked calls with theirs) is
 * counted against a cap, and anything that would pass it is refused before
 * it changes a thing.
 */
import { RendezvousError } from './errors.ts';

/** How one parked call is answered. */
export interface Parked {
  ready(): void;
  /** `missing`: keys not yet set, or ranks not yet at the barrier (at most MAX_LISTED); `arrived`: barrier arrivals. */
  timedOut(missing: string[], arrived: number): void;
  failed(message: string): void;
}

interface KeyWaiter {
  owner: object;
  missing: Set<string>;
  timer: NodeJS.Timeout;
  parked: Parked;
  bytes: number;
}

interface Arrival {
  owner: object;
  rank: number;
  timer: NodeJS.Timeout;
  parked: Parked;
  bytes: number;
}

interface Barrier {
  worldSize: number;
  arrivals: Arrival[];
}

/** Missing ranks listed in a barrier timeout; the arrival count tells the rest. */
const MAX_LISTED = 64;

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) === 0;

/**
 * What an entry or a parked call costs beyond its bytes (map entry, timer,
 * closures), counted so that a flood of tiny keys or waits meets the cap too.
 */
export const ENTRY_OVERHEAD_BYTES = 64;
export const PARKED_OVERHEAD_BYTES = 256;

const keyBytes = (key: string) => Buffer.byteLength(key, 'utf8');
const entryBytes = (key: string, value: Uint8Array) =>
  ENTRY_OVERHEAD_BYTES + keyBytes(key) + value.byteLength;

export class RendezvousTable {
  private readonly values = new Map<string, Uint8Array>();
  private readonly waitersByKey = new Map<string, Set<KeyWaiter>>();
  private readonly barriers = new Map<string, Barrier>();
  private held = 0;

  /** `maxBytes`: the cap on what the table holds (RendezvousServerOptions.maxStoredBytes). */
  constructor(private readonly maxBytes = Number.POSITIVE_INFINITY) {}

  /** Bytes held now: values with their keys, and parked calls with theirs, each with its overhead. */
  get heldBytes(): number {
    return this.held;
  }

  get(key: string): Uint8Array | undefined {
    return this.values.get(key);
  }

  has(key: string): boolean {
    return this.values.has(key);
  }

  set(key: string, value: Uint8Array): void {
    const current = this.values.get(key);
    this.reserve(
      `set('${key}')`,
      entryBytes(key, value) - (current === undefined ? 0 : entryBytes(key, current)),
    );
    this.values.set(key, value);
    const waiters = this.waitersByKey.get(key);
    if (!waiters) return;
    this.waitersByKey.delete(key);
    for (const waiter of waiters) {
      waiter.missing.delete(key);
      if (waiter.missing.size === 0) {
        this.settle(waiter);
        waiter.parked.ready();
      }
    }
  }

  /** c10d semantics: counters are decimal text, so `get` of a counter reads its value. */
  add(key: string, delta: number): number {
    const current = this.values.get(key);
    const text = current === undefined ? '0' : Buffer.from(current).toString('latin1');
    if (!/^-?\d+$/.test(text))
      throw new RendezvousError(`add('${key}'): the key holds a value that is not an integer`);
    const sum = Number(text) + delta;
    if (!Number.isSafeInteger(sum))
      throw new RendezvousError(`add('${key}'): ${text} + ${delta} is not a safe integer`);
    this.set(key, Buffer.from(String(sum), 'latin1'));
    return sum;
  }

  /**
   * c10d semantics: sets `desired` when the key holds `expected`, or when it is
   * missing and `expected` is empty; returns the value the key holds afterwards
   * (for a missing key and a non-empty `expected`, returns `expected`).
   */
  compareSet(key: string, expected: Uint8Array, desired: Uint8Array): Uint8Array {
    const current = this.values.get(key);
    if (current === undefined) {
      if (expected.byteLength !== 0) return expected;
    } else if (!sameBytes(current, expected)) {
      return current;
    }
    this.set(key, desired);
    return desired;
  }

  delete(key: string): boolean {
    const current = this.values.get(key);
    if (current === undefined) return false;
    this.held -= entryBytes(key, current);
    return this.values.delete(key);
  }

  /** Parks until every key is set; answers at once when they already are. */
  wait(owner: object, keys: readonly string[], timeoutMs: number, parked: Parked): void {
    const missing = new Set(keys.filter((k) => !this.values.has(k)));
    if (missing.size === 0) {
      parked.ready();
      return;
    }
    const bytes = PARKED_OVERHEAD_BYTES + keys.reduce((sum, k) => sum + keyBytes(k), 0);
    this.reserve(`wait for ${keys.length} key(s)`, bytes);
    const waiter: KeyWaiter = {
      owner,
      missing,
      parked,
      bytes,
      timer: setTimeout(() => {
        this.unpark(waiter);
        parked.timedOut([...waiter.missing], 0);
      }, timeoutMs),
    };
    for (const key of missing) {
      let set = this.waitersByKey.get(key);
      if (!set) this.waitersByKey.set(key, (set = new Set()));
      set.add(waiter);
    }
  }

  /**
   * Parks until `worldSize` callers reached the barrier `name`; the last one
   * releases them all and the name is free for the next round. Callers that
   * disagree on worldSize, or a rank that arrives twice, fail the round.
   */
  barrier(
    owner: object,
    name: string,
    worldSize: number,
    rank: number,
    timeoutMs: number,
    parked: Parked,
  ): void {
    let barrier = this.barriers.get(name);
    if (!barrier) this.barriers.set(name, (barrier = { worldSize, arrivals: [] }));
    const round = barrier;
    const clash = this.barrierClash(round, owner, worldSize, rank);
    if (clash) {
      this.barriers.delete(name);
      for (const a of round.arrivals) {
        this.settle(a);
        a.parked.failed(`barrier '${name}' failed: ${clash}`);
      }
      parked.failed(`barrier '${name}': ${clash}`);
      return;
    }
    if (round.arrivals.length + 1 === worldSize) {
      this.barriers.delete(name);
      for (const a of round.arrivals) {
        this.settle(a);
        a.parked.ready();
      }
      parked.ready();
      return;
    }
    const bytes = PARKED_OVERHEAD_BYTES + keyBytes(name);
    try {
      this.reserve(`barrier('${name}')`, bytes);
    } catch (error) {
      if (round.arrivals.length === 0) this.barriers.delete(name);
      throw error;
    }
    const arrival: Arrival = {
      owner,
      rank,
      parked,
      bytes,
      timer: setTimeout(() => {
        const missing = missingRanks(round);
        const arrived = round.arrivals.length;
        this.leave(name, arrival);
        parked.timedOut(missing, arrived);
      }, timeoutMs),
    };
    round.arrivals.push(arrival);
  }

  /** Forgets everything a closed connection was waiting for. */
  dropOwner(owner: object): void {
    for (const [key, waiters] of this.waitersByKey) {
      for (const w of waiters) if (w.owner === owner) this.unpark(w);
      if (waiters.size === 0) this.waitersByKey.delete(key);
    }
    for (const [name, round] of this.barriers) {
      for (const a of round.arrivals) if (a.owner === owner) this.leave(name, a);
    }
  }

  /** Stops every timer; parked calls are answered by their connections closing. */
  clear(): void {
    for (const waiters of this.waitersByKey.values()) for (const w of waiters) clearTimeout(w.timer);
    for (const round of this.barriers.values()) for (const a of round.arrivals) clearTimeout(a.timer);
    this.waitersByKey.clear();
    this.barriers.clear();
    this.values.clear();
    this.held = 0;
  }

  /** Counts `bytes` more as held, or throws (changing nothing) when that would pass the cap. */
  private reserve(what: string, bytes: number): void {
    if (bytes > 0 && this.held + bytes > this.maxBytes) {
      throw new RendezvousError(
        `${what} refused: the rendezvous store holds ${this.held} bytes and this needs ${bytes} more, over its cap of ${this.maxBytes} bytes (maxStoredBytes); nothing was changed`,
      );
    }
    this.held += bytes;
  }

  private barrierClash(round: Barrier, owner: object, worldSize: number, rank: number): string | undefined {
    if (round.worldSize !== worldSize) {
      return `${who(rank)} passed worldSize ${worldSize} but ${who(round.arrivals[0].rank)} passed ${round.worldSize}`;
    }
    if (round.arrivals.some((a) => a.owner === owner)) return `${who(rank)} arrived twice on one connection`;
    if (rank >= 0 && round.arrivals.some((a) => a.rank === rank)) return `rank ${rank} arrived twice`;
    return undefined;
  }

  /** Ends a parked call's deadline and what it held. */
  private settle(call: KeyWaiter | Arrival): void {
    clearTimeout(call.timer);
    this.held -= call.bytes;
    call.bytes = 0;
  }

  private unpark(waiter: KeyWaiter): void {
    this.settle(waiter);
    for (const key of waiter.missing) this.waitersByKey.get(key)?.delete(waiter);
  }

  private leave(name: string, arrival: Arrival): void {
    this.settle(arrival);
    const round = this.barriers.get(name);
    if (!round) return;
    round.arrivals = round.arrivals.filter((a) => a !== arrival);
    if (round.arrivals.length === 0) this.barriers.delete(name);
  }
}

function who(rank: number): string {
  return rank >= 0 ? `rank ${rank}` : 'a client without a rank';
}

/** Ranks not at the barrier, when every arrival named its rank; else none can be named. */
function missingRanks(round: Barrier): string[] {
  if (round.arrivals.some((a) => a.rank < 0)) return [];
  const arrived = new Set(round.arrivals.map((a) => a.rank));
  const missing: string[] = [];
  for (let r = 0; r < round.worldSize && missing.length < MAX_LISTED; r++)
    if (!arrived.has(r)) missing.push(String(r));
  return missing;
}
