/**
 * The meetings of predict mode's clocks (predict/clock-meeting.ts) on a
 * group's twin backend, where the members map no memory in common: the
 * members allReduce their stamps once the call ended, a round trip of its
 * own. Where a message costs little (ranks as tasks of one thread), in a
 * small group, each member sends its stamp to every other as it issues the
 * call instead, so they are there to take once it ended; a message between
 * processes takes the store's handshake, which costs more than the round
 * trip, and a large group would send N² a call.
 */
import type { ClockMeeting, MetClocks } from '../predict/clock-meeting.ts';
import { runErrand } from '../runtime/errands.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { Backend, CallInfo } from './backend.ts';

/** The largest group whose members send their stamps to each other. */
export const STAMPS_MAX_SIZE = 8;
/** The collectives' stamps' stream on the twin: below every tag a program's point-to-point calls may take. */
const STAMP_TAG = -1;
/** The twin's calls: no fingerprints (the group's own call was checked), matched by their own numbering. */
const SIGNATURE = 'predict clock';

export interface TwinGroup {
  /** This rank's group rank. */
  rank: number;
  size: number;
  timeoutMs: number;
}

/** A call on the twin; `seq` -1 for a point-to-point one. */
export function twinCall(seq: number, timeoutMs: number): CallInfo {
  return { seq, signature: SIGNATURE, timeoutMs, checks: false };
}

/** The meeting on a twin whose messages cost little (TaskBackend's). */
export function sentOrReduced(twin: Backend, group: TwinGroup): ClockMeeting {
  return group.size <= STAMPS_MAX_SIZE ? new SentStamps(twin, group) : new ReducedStamps(twin, group);
}

abstract class TwinStamps implements ClockMeeting {
  /** This member's stamps posted and not yet met. */
  protected readonly mine = new Map<number, Tensor>();

  constructor(
    protected readonly twin: Backend,
    protected readonly group: TwinGroup,
  ) {}

  post(index: number, clockUs: number, bytes: number): void {
    // Its clock and bytes as it issued the call.
    this.mine.set(index, Tensor.fromArray([clockUs, bytes], undefined, 'float64'));
  }

  abstract meet(index: number): Promise<MetClocks>;

  /** This member's stamp of `index`, forgotten here. */
  protected take(index: number): Tensor {
    const mine = this.mine.get(index) as Tensor;
    this.mine.delete(index);
    return mine;
  }
}

class SentStamps extends TwinStamps {
  override post(index: number, clockUs: number, bytes: number): void {
    super.post(index, clockUs, bytes);
    const { rank, size, timeoutMs } = this.group;
    // Only read, by every send: one tensor serves them all. Nobody waits on them but the peers; the rank's
    // close waits for them to be taken.
    const mine = this.mine.get(index) as Tensor;
    for (let peer = 0; peer < size; peer++)
      if (peer !== rank) runErrand(this.twin.send(twinCall(-1, timeoutMs), mine, peer, STAMP_TAG));
  }

  async meet(index: number): Promise<MetClocks> {
    const { rank, size, timeoutMs } = this.group;
    const stamps = [this.take(index)];
    const received: Promise<void>[] = [];
    for (let peer = 0; peer < size; peer++) {
      if (peer === rank) continue;
      const theirs = Tensor.zeros([2], 'float64');
      stamps.push(theirs);
      received.push(this.twin.recv(twinCall(-1, timeoutMs), theirs, peer, STAMP_TAG));
    }
    await Promise.all(received);
    let latestUs = Number.NEGATIVE_INFINITY;
    let bytes = 0;
    for (const { data } of stamps) {
      latestUs = Math.max(latestUs, data[0] as number);
      bytes = Math.max(bytes, data[1] as number);
    }
    return { latestUs, bytes };
  }
}

export class ReducedStamps extends TwinStamps {
  async meet(index: number): Promise<MetClocks> {
    const mine = this.take(index);
    await this.twin.allReduce(twinCall(index, this.group.timeoutMs), mine, 'max');
    const [latestUs, bytes] = mine.data as Float64Array;
    return { latestUs, bytes };
  }
}
