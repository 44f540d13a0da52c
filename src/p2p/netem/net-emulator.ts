/**
 * One worker's view of the emulated network (cluster.net_emulation). Each
 * worker owns its uplink and, per receiver, the downlink it sends into; each
 * has a clock saying when it is next free, so sends through one link queue
 * behind each other. A message of `wireBytes` starts when the uplink and every
 * receiver's downlink are free, holds the uplink for bytes / uplink rate (once,
 * for a broadcast too), holds each receiver's downlink until its copy is
 * through at min(uplink, downlink), and arrives one-way latency later.
 *
 * `real` mode: clocks run on wall time and a message is handed to the
 * transport only at its arrival time. `account` mode: nothing waits; the
 * clocks are virtual (compute takes no time, the links start at 0) and the
 * report predicts how long the traffic would take. In a job that predicts
 * (predict/), a message is charged at its sender's virtual time instead
 * (`atS`), so the links' clocks are the job's virtual clock, and p2p/outbox.ts
 * waits for nothing: the arrival is the message's predicted arrival.
 *
 * Downlinks are per sender: two workers sending to one receiver do not slow
 * each other down (each worker only sees its own traffic).
 */
import type { NetEmulationConfig, NetEmulationMode } from '../../runtime/config/cluster-config.ts';

export interface NetTransfer {
  kind: 'send' | 'broadcast';
  to: string[];
  /** Header bytes plus each tensor's bytes on the wire (compressed size when compressed). */
  wireBytes: number;
  /** Seconds on the emulator clock. */
  startS: number;
  /** Per receiver, when its copy arrives. */
  arrivalS: number[];
  /** When the last receiver has it. */
  doneS: number;
}

export interface NetReport {
  mode: NetEmulationMode;
  worker: string;
  messages: number;
  wireBytes: number;
  /** When this worker's traffic so far is all delivered: the predicted transfer time in account mode. */
  predictedS: number;
  uplinkFreeAtS: number;
  downlinkFreeAtS: Record<string, number>;
  /** The most recent transfers (at most 10,000). */
  transfers: NetTransfer[];
}

const MAX_RECORDED = 10_000;
const BITS_PER_MBIT = 1e6;

export class NetEmulator {
  readonly mode: NetEmulationMode;
  readonly worker: string;
  readonly #groupOf = new Map<string, string>();
  readonly #config: NetEmulationConfig;
  readonly #epoch = performance.now();
  #uplinkFree = 0;
  readonly #downlinkFree = new Map<string, number>();
  readonly #transfers: NetTransfer[] = [];
  #messages = 0;
  #wireBytes = 0;
  #predicted = 0;

  /** Every job worker must be in a group: none may silently send undelayed. */
  constructor(config: NetEmulationConfig, worker: string, jobWorkers: readonly string[]) {
    this.#config = config;
    this.mode = config.mode;
    this.worker = worker;
    for (const [group, g] of Object.entries(config.groups)) {
      for (const w of g.workers) {
        if (!jobWorkers.includes(w)) {
          throw new RangeError(
            `net_emulation: group "${group}" names worker "${w}", which is not in this job (workers: ${jobWorkers.join(', ')})`,
          );
        }
        this.#groupOf.set(w, group);
      }
    }
    const missing = jobWorkers.filter((w) => !this.#groupOf.has(w));
    if (missing.length > 0) {
      throw new RangeError(
        `net_emulation: worker(s) ${missing.join(', ')} are in no group; every worker needs a link to be emulated`,
      );
    }
  }

  /**
   * Charges one message to the links it crosses; returns each receiver's arrival time. `atS`: the
   * message's time on the job's virtual clock (predict mode), instead of this emulator's now.
   */
  charge(kind: NetTransfer['kind'], to: readonly string[], wireBytes: number, atS?: number): number[] {
    return this.begin(kind, to, atS)(wireBytes);
  }

  /**
   * A message whose parts are charged as they become ready (compressed
   * chunks), so its wire time overlaps their preparation: the returned
   * function charges the next part and returns each receiver's arrival time
   * of it. The message is one transfer in the report. `atS` as for charge.
   */
  begin(kind: NetTransfer['kind'], to: readonly string[], atS?: number): (wireBytes: number) => number[] {
    const self = this.#group(this.worker);
    const transfer: NetTransfer = { kind, to: [...to], wireBytes: 0, startS: -1, arrivalS: [], doneS: 0 };
    this.#messages++;
    this.#transfers.push(transfer);
    if (this.#transfers.length > MAX_RECORDED) this.#transfers.shift();
    return (wireBytes) => {
      const bits = wireBytes * 8;
      const start = Math.max(
        atS ?? this.#now(),
        this.#uplinkFree,
        ...to.map((r) => this.#downlinkFree.get(r) ?? 0),
      );
      if (transfer.startS < 0) transfer.startS = start;
      this.#uplinkFree = start + bits / (self.uplinkMbps * BITS_PER_MBIT);
      const arrivalS = to.map((receiver) => {
        const rate = Math.min(self.uplinkMbps, this.#group(receiver).downlinkMbps) * BITS_PER_MBIT;
        const through = start + bits / rate;
        this.#downlinkFree.set(receiver, through);
        return through + this.#latencyS(this.worker, receiver);
      });
      transfer.wireBytes += wireBytes;
      transfer.arrivalS = arrivalS;
      transfer.doneS = Math.max(...arrivalS);
      this.#predicted = Math.max(this.#predicted, transfer.doneS);
      this.#wireBytes += wireBytes;
      return arrivalS;
    };
  }

  /** Resolves at `arrivalS` in real mode, at once in account mode. */
  waitUntil(arrivalS: number): Promise<void> {
    const ms = this.mode === 'real' ? (arrivalS - this.#now()) * 1000 : 0;
    return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
  }

  report(): NetReport {
    return {
      mode: this.mode,
      worker: this.worker,
      messages: this.#messages,
      wireBytes: this.#wireBytes,
      predictedS: this.#predicted,
      uplinkFreeAtS: this.#uplinkFree,
      downlinkFreeAtS: Object.fromEntries(this.#downlinkFree),
      transfers: this.#transfers.map((t) => ({ ...t, to: [...t.to], arrivalS: [...t.arrivalS] })),
    };
  }

  #now(): number {
    return this.mode === 'real' ? (performance.now() - this.#epoch) / 1000 : 0;
  }

  #group(worker: string) {
    return this.#config.groups[this.#groupOf.get(worker)!];
  }

  /** An entry covers its reverse direction too, unless the reverse has an entry of its own. */
  #latencyS(from: string, to: string): number {
    const a = this.#groupOf.get(from);
    const b = this.#groupOf.get(to);
    const entry =
      this.#config.latency.find((l) => l.from === a && l.to === b) ??
      this.#config.latency.find((l) => l.from === b && l.to === a);
    return (entry?.oneWayMs ?? 0) / 1000;
  }
}
