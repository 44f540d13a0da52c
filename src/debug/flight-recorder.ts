/** A fixed-size ring of a rank's most recent calls (PyTorch's flight recorder, per rank). */
import type { CallEntry, CallRecord } from './call-record.ts';
import { formatSite } from './call-site.ts';

export class FlightRecorder {
  readonly #ring: Array<CallRecord | undefined>;
  #next = 0;
  #recorded = 0;

  constructor(readonly size: number) {
    this.#ring = new Array(size);
  }

  record(call: CallRecord): void {
    if (this.size === 0) return;
    this.#ring[this.#next] = call;
    this.#next = (this.#next + 1) % this.size;
    this.#recorded++;
  }

  /** Calls recorded so far, including those the ring has overwritten. */
  get recorded(): number {
    return this.#recorded;
  }

  /** The entries, oldest first, as plain objects (call sites formatted). */
  dump(): CallEntry[] {
    const ordered = [...this.#ring.slice(this.#next), ...this.#ring.slice(0, this.#next)];
    return ordered.filter((r): r is CallRecord => r !== undefined).map(toEntry);
  }
}

export function toEntry(r: CallRecord): CallEntry {
  const { site, peers, ...rest } = r;
  const entry: CallEntry = { ...rest, peers: [...peers] };
  const formatted = formatSite(site);
  if (formatted) entry.site = formatted;
  return entry;
}
