/**
 * A group's calls in predict mode (predict/): each call still runs for real
 * (results stay exact); beside it the members exchange their virtual clocks
 * on a twin of the group (its own backend over the rank's store, so the
 * exchange never takes the group's call numbers, tags or communicator), and
 * the call's Work carries its predicted start and end. The rank's clock
 * catches up with a call's end where the program waits on the call.
 *
 * Collectives: a call starts when the latest member issued it and the
 * group's previous collective ended (one stream per group, as NCCL runs a
 * communicator's calls); it lasts what the model says for the members'
 * placement. Point to point: a send starts as it is issued and lasts the
 * transfer over the link between the two ranks; the receive completes at the
 * later of its post and the message's arrival (its sender's clock travels on
 * the twin, in the same stream order as the message).
 */
import { predictCollective } from '../predict/predict-collective.ts';
import type { CallTiming, RankClock } from '../predict/rank-clock.ts';
import { runErrand } from '../runtime/errands.ts';
import { Work, whenWaitedOn } from '../runtime/work.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { Backend, CallInfo } from './backend.ts';
import type { OpName } from './ops.ts';

/** The twin's calls: no fingerprints (the group's own call was checked), matched by their own numbering. */
const SIGNATURE = 'predict clock';

export interface PredictedGroup {
  name: string;
  /** Members' global ranks, in group-rank order. */
  ranks: readonly number[];
  /** This rank's group rank. */
  rank: number;
  timeoutMs: number;
}

export class GroupPrediction {
  readonly #clock: RankClock;
  readonly #exchange: Backend;
  readonly #group: PredictedGroup;
  #exchangeSeq = 0;
  #p2pSeq = 0;
  /** The end of the group's latest collective: the same on every member, so never exchanged. */
  #lastEnd: Promise<number> = Promise.resolve(0);

  constructor(clock: RankClock, exchange: Backend, group: PredictedGroup) {
    this.#clock = clock;
    this.#exchange = exchange;
    this.#group = group;
  }

  get active(): boolean {
    return !this.#clock.stopped;
  }

  #info(seq: number): CallInfo {
    return { seq, signature: SIGNATURE, timeoutMs: this.#group.timeoutMs, checks: false };
  }

  /** A collective's Work: settles once the call and its exchange have, carrying the call's predicted times. */
  collective<T>(op: OpName, seq: number, bytes: number, outcome: T | Promise<T>): Work<T> {
    const group = this.#group;
    const model = predictCollective({ op, bytes, ranks: group.ranks, topology: this.#clock.topology });
    const latest = Tensor.full([1], this.#clock.now(), 'float64');
    const exchanged = this.#exchange.allReduce(this.#info(this.#exchangeSeq++), latest, 'max');
    const previous = this.#lastEnd;
    const timing = Promise.all([exchanged, previous]).then(([, previousEnd]) => {
      const startUs = Math.max(latest.data[0] as number, previousEnd);
      return { startUs, endUs: startUs + model.us };
    });
    // A failed exchange fails this call (below); later calls then wait on no end.
    this.#lastEnd = timing.then(
      (t) => t.endUs,
      () => 0,
    );
    return this.#settled(outcome, timing, (t) => ({
      group: group.name,
      seq,
      op,
      bytes,
      algorithm: model.algorithm,
      protocol: model.protocol,
      startUs: t.startUs,
      endUs: t.endUs,
      busbwGBps: model.busbwGBps,
    }));
  }

  /** A send to group rank `dst`: its clock and bytes go to the receiver on the twin, in the message's stream order. */
  send<T>(op: OpName, dst: number, tag: number, bytes: number, outcome: T | Promise<T>): Work<T> {
    const startUs = this.#clock.now();
    const peer = this.#group.ranks[dst];
    const model = this.#transfer(bytes, this.#group.ranks[this.#group.rank], peer);
    const stamp = Tensor.fromArray([startUs, bytes], undefined, 'float64');
    // Nobody waits on it but the receiver; the rank's close waits for it to be taken.
    runErrand(this.#exchange.send(this.#info(-1), stamp, dst, tag));
    const timing = { startUs, endUs: startUs + model.us };
    const seq = this.#p2pSeq++;
    return this.#settled(outcome, Promise.resolve(timing), () =>
      this.#p2pRecord(op, seq, bytes, model, timing, peer),
    );
  }

  /**
   * A receive from group rank `src` (undefined: from any, which its outcome names). Its stamp is
   * received now, where the source is known, so stamps pair with messages in posting order.
   */
  recv<T>(op: OpName, src: number | undefined, tag: number, outcome: T | Promise<T>): Work<T> {
    const postedUs = this.#clock.now();
    const seq = this.#p2pSeq++;
    const heard = src === undefined ? undefined : this.#stamp(src, tag);
    let from = src;
    let bytes = 0;
    const timing = (async () => {
      if (heard === undefined) from = (await outcome) as number;
      const [sentUs, sentBytes] = await (heard ?? this.#stamp(from as number, tag));
      bytes = sentBytes;
      const model = this.#transfer(
        bytes,
        this.#group.ranks[from as number],
        this.#group.ranks[this.#group.rank],
      );
      return {
        startUs: Math.max(postedUs, sentUs),
        endUs: Math.max(postedUs, sentUs + model.us),
        model,
      };
    })();
    return this.#settled(outcome, timing, (t) =>
      this.#p2pRecord(op, seq, bytes, t.model, t, this.#group.ranks[from as number]),
    );
  }

  #stamp(src: number, tag: number): Promise<[number, number]> {
    const stamp = Tensor.zeros([2], 'float64');
    return this.#exchange
      .recv(this.#info(-1), stamp, src, tag)
      .then(() => [stamp.data[0] as number, stamp.data[1] as number]);
  }

  #transfer(bytes: number, from: number, to: number) {
    return predictCollective({ op: 'send', bytes, ranks: [from, to], topology: this.#clock.topology });
  }

  /** `seq`: the call's place among the group's point-to-point calls on this rank, in the program's order. */
  #p2pRecord(
    op: OpName,
    seq: number,
    bytes: number,
    model: { algorithm: string; protocol: string; busbwGBps: number },
    timing: CallTiming,
    peer: number,
  ) {
    return {
      group: this.#group.name,
      seq,
      op,
      bytes,
      algorithm: model.algorithm,
      protocol: model.protocol,
      startUs: timing.startUs,
      endUs: timing.endUs,
      busbwGBps: model.busbwGBps,
      peer,
    };
  }

  /**
   * The call's Work: its outcome once its timing is known too (the call's own
   * failure first). The call is recorded then; where the program waits on the
   * Work (now or before), the rank's clock catches up with the call's end.
   */
  #settled<T, C extends CallTiming>(
    outcome: T | Promise<T>,
    timing: Promise<C>,
    record: (timing: C) => Parameters<RankClock['record']>[0],
  ): Work<T> {
    const clock = this.#clock;
    let known: C | undefined;
    let waited = false;
    // The timing's own failure surfaces through the call's Work, never as an unhandled rejection.
    timing.catch(() => undefined);
    const work = new Work<T>(
      Promise.resolve(outcome).then(async (value) => {
        known = await timing;
        clock.record(record(known));
        if (waited) clock.waitFor(known);
        return value;
      }),
    );
    whenWaitedOn(work as Work<unknown>, () => {
      if (known === undefined) waited = true;
      else clock.waitFor(known);
    });
    return work;
  }
}
