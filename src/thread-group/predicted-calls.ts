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
 * transfer over the link between the two ranks (or, for a p2p message on an
 * emulated link, until the arrival the emulator gave it); the receive
 * completes at the later of its post and the message's arrival (the sender's
 * clock and the arrival go ahead of the message: GroupPrediction.postSend).
 *
 * A call made by a layer above ThreadGroup for one of its own calls is issued
 * at that layer call's clock, and waits on it move that clock, not the
 * rank's (predict/layer-clock.ts).
 */
import type { ClockMeeting, MetClocks } from '../predict/clock-meeting.ts';
import { callIssuer, emulatedArrivalUs } from '../predict/layer-clock.ts';
import { type MessageStamps, STAMP_VALUES } from '../predict/message-stamps.ts';
import { type CollectivePrediction, predictCollective } from '../predict/predict-collective.ts';
import type { CallIssuer, CallTiming, RankClock } from '../predict/rank-clock.ts';
import { timedWork } from '../predict/timed-work.ts';
import { runErrand } from '../runtime/errands.ts';
import type { Work } from '../runtime/work.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { Backend } from './backend.ts';
import { twinCall } from './clock-meetings.ts';
import type { OpName } from './ops.ts';
import { StreamCounters } from './store-backend/p2p.ts';

/**
 * Where the members exchange clocks: the collectives' meeting (predict/clock-meeting.ts); the
 * point-to-point calls' stamps on a board where the members have one (predict/message-stamps.ts),
 * else on the twin backend.
 */
export interface ClockExchange {
  twin: Backend;
  meeting: ClockMeeting;
  stamps?: MessageStamps;
}

/** Model answers a group keeps, by call (op, size, and a message's ends). */
const MODELS_KEPT = 256;

export interface PredictedGroup {
  name: string;
  /** Members' global ranks, in group-rank order. */
  ranks: readonly number[];
  /** This rank's group rank. */
  rank: number;
  timeoutMs: number;
}

/** A collective's predicted times, and what the model said of it. */
interface CollectiveTiming extends CallTiming {
  bytes: number;
  model: CollectivePrediction;
}

/** A send whose stamp was posted (GroupPrediction.postSend), to be issued. */
export interface PostedSend {
  issuer: CallIssuer;
  timing: CallTiming;
  model: { algorithm: string; protocol: string; busbwGBps: number };
  bytes: number;
  /** The receiver's global rank. */
  peer: number;
}

/** A collective whose member's clock was posted (GroupPrediction.post), to be issued. */
export interface PostedCollective {
  issuer: CallIssuer;
  index: number;
}

export class GroupPrediction {
  readonly #clock: RankClock;
  readonly #exchange: Backend;
  readonly #meeting: ClockMeeting;
  readonly #stamps: MessageStamps | undefined;
  /** Point-to-point messages' numbers in their streams (sender → receiver, tag), as the backend numbers them. */
  readonly #sent = new StreamCounters();
  readonly #received = new StreamCounters();
  readonly #group: PredictedGroup;
  #exchangeSeq = 0;
  /** The latest collective's timing, once issued: the next one is met after it. */
  #exchanging: Promise<unknown> = Promise.resolve();
  /** Every collective up to this index was met... */
  #metThrough = -1;
  /** ...and the latest of them ended then: the same on every member, so never exchanged. */
  #lastEndUs = 0;
  readonly #models = new Map<string, CollectivePrediction>();

  constructor(clock: RankClock, exchange: ClockExchange, group: PredictedGroup) {
    this.#clock = clock;
    this.#exchange = exchange.twin;
    this.#meeting = exchange.meeting;
    this.#stamps = exchange.stamps;
    this.#group = group;
  }

  get active(): boolean {
    return !this.#clock.stopped;
  }

  /**
   * A collective about to be issued: this member's clock and what it knows of the call's size, posted
   * before the call is, since a call may keep its thread until its peers come (a wait's spin), and they
   * would then find no post when the call ended. `bytes` is what this member knows of the call's size:
   * the members' largest counts, so an object's size, known only where it is serialised
   * (broadcastObject's source, ...), reaches every member.
   */
  post(bytes: number): PostedCollective {
    const issuer = callIssuer(this.#clock);
    const index = this.#exchangeSeq++;
    this.#meeting.post(index, issuer.now(), bytes);
    return { issuer, index };
  }

  /**
   * A posted collective's Work: settles once the call and its meeting have, carrying its predicted
   * times. The meeting goes in the order of the group's collectives: where the one before was met and
   * every post is there as the call ends (as a board mostly finds them), it is met at once, in the
   * call's own settling, with no promise of its own between the call's end and its caller.
   */
  collective<T>(op: OpName, seq: number, posted: PostedCollective, outcome: T | Promise<T>): Work<T> {
    const group = this.#group;
    const { index } = posted;
    const previous = this.#exchanging;
    let metAtOnce: CollectiveTiming | undefined;
    const timing = settled(outcome).then(() => {
      const now = this.#metThrough === index - 1 ? this.#meeting.metNow?.(index) : undefined;
      if (now) return (metAtOnce = this.#timed(op, index, now));
      return previous.then(() => this.#meeting.meet(index)).then((met) => this.#timed(op, index, met));
    });
    // A failed meeting fails this call (below), and the group's later ones, which go after it.
    this.#exchanging = timing;
    quietly(timing);
    return this.#settled(
      posted.issuer,
      outcome,
      () => metAtOnce ?? timing,
      (t) => ({
        group: group.name,
        seq,
        op,
        bytes: t.bytes,
        algorithm: t.model.algorithm,
        protocol: t.model.protocol,
        startUs: t.startUs,
        endUs: t.endUs,
        busbwGBps: t.model.busbwGBps,
      }),
    );
  }

  /** Collective `index`'s times once met: it starts when its latest member issued it and the one before ended. */
  #timed(op: OpName, index: number, { latestUs, bytes }: MetClocks): CollectiveTiming {
    const model = this.#model(op, bytes);
    const startUs = Math.max(latestUs, this.#lastEndUs);
    const endUs = startUs + model.us;
    this.#lastEndUs = endUs;
    this.#metThrough = index;
    return { startUs, endUs, bytes, model };
  }

  /**
   * A send to group rank `dst` about to be issued: its start, bytes and arrival go to the receiver
   * before the message does, on the stamps' board where the members have one (so the message's
   * arrival finds them there), else on the twin, in the message's stream order. It arrives when an
   * emulated link says (p2p/netem/), else after the transfer.
   */
  postSend(dst: number, tag: number, bytes: number): PostedSend {
    const issuer = callIssuer(this.#clock);
    const startUs = issuer.now();
    const { rank, ranks, timeoutMs } = this.#group;
    const arrivalUs = emulatedArrivalUs();
    const model =
      arrivalUs === undefined
        ? this.#transfer(bytes, ranks[rank], ranks[dst])
        : emulatedTransfer(bytes, arrivalUs - startUs);
    const timing = { startUs, endUs: startUs + model.us };
    const stamp = [startUs, bytes, timing.endUs, arrivalUs === undefined ? 0 : 1];
    const message = { sender: rank, receiver: dst, tag, number: this.#sent.take(rank, dst, tag) };
    if (!this.#stamps?.write(message, stamp)) {
      // Nobody waits on it but the receiver; the rank's close waits for it to be taken.
      const sent = Tensor.fromArray(stamp, undefined, 'float64');
      runErrand(this.#exchange.send(twinCall(-1, timeoutMs), sent, dst, tag));
    }
    return { issuer, timing, model, bytes, peer: ranks[dst] };
  }

  /** A posted send's Work: settles once the call has, carrying its predicted times. */
  send<T>(op: OpName, posted: PostedSend, outcome: T | Promise<T>): Work<T> {
    const { issuer, timing, model, bytes, peer } = posted;
    return this.#settled(
      issuer,
      outcome,
      () => timing,
      () => this.#p2pRecord(op, bytes, model, timing, peer),
    );
  }

  /**
   * A receive from group rank `src` (undefined: from any, which its outcome names). Its message's
   * number in its stream is taken now where the source is known, so stamps pair with messages in
   * posting order; its stamp is read once the message arrived.
   */
  recv<T>(op: OpName, src: number | undefined, tag: number, outcome: T | Promise<T>): Work<T> {
    const issuer = callIssuer(this.#clock);
    const postedUs = issuer.postedUs?.() ?? issuer.now();
    const me = this.#group.rank;
    const number = src === undefined ? undefined : this.#received.take(src, me, tag);
    let from = src;
    let bytes = 0;
    const timing = (async () => {
      const value = await outcome;
      from ??= value as number;
      const message = {
        sender: from,
        receiver: me,
        tag,
        number: number ?? this.#received.take(from, me, tag),
      };
      const [sentUs, sentBytes, arrivalUs, emulated] =
        this.#stamps?.take(message) ?? (await this.#twinStamp(from, tag));
      bytes = sentBytes;
      const model = emulated
        ? emulatedTransfer(bytes, arrivalUs - sentUs)
        : this.#transfer(bytes, this.#group.ranks[from], this.#group.ranks[me]);
      return { startUs: Math.max(postedUs, sentUs), endUs: Math.max(postedUs, arrivalUs), model };
    })();
    quietly(timing);
    return this.#settled(
      issuer,
      outcome,
      () => timing,
      (t) => this.#p2pRecord(op, bytes, t.model, t, this.#group.ranks[from as number]),
    );
  }

  /** A stamp the sender sent on the twin (STAMP_VALUES: see postSend). */
  #twinStamp(src: number, tag: number): Promise<Float64Array> {
    const stamp = Tensor.zeros([STAMP_VALUES], 'float64');
    return this.#exchange
      .recv(twinCall(-1, this.#group.timeoutMs), stamp, src, tag)
      .then(() => stamp.data as Float64Array);
  }

  /** The model's answer for a collective of the group: the same for every call of that op and size. */
  #model(op: OpName, bytes: number): CollectivePrediction {
    return this.#predicted(`${op} ${bytes}`, op, bytes, this.#group.ranks);
  }

  /** The model's answer for a message between global ranks `from` and `to`. */
  #transfer(bytes: number, from: number, to: number): CollectivePrediction {
    return this.#predicted(`send ${bytes} ${from} ${to}`, 'send', bytes, [from, to]);
  }

  /** predictCollective's answer, kept under `key` (a model of many channels takes tens of µs). */
  #predicted(key: string, op: OpName, bytes: number, ranks: readonly number[]): CollectivePrediction {
    let model = this.#models.get(key);
    if (model === undefined) {
      // A job of ever new sizes keeps only the latest.
      if (this.#models.size === MODELS_KEPT) this.#models.clear();
      model = predictCollective({ op, bytes, ranks, topology: this.#clock.topology });
      this.#models.set(key, model);
    }
    return model;
  }

  /**
   * A point-to-point call's record. Its `seq` is given in the report (predict/prediction-files.ts), in
   * predicted-time order: the order a rank issues them in may be the real run's race.
   */
  #p2pRecord(
    op: OpName,
    bytes: number,
    model: { algorithm: string; protocol: string; busbwGBps: number },
    timing: CallTiming,
    peer: number,
  ) {
    return {
      group: this.#group.name,
      seq: 0,
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

  /** The call's Work (predict/timed-work.ts), recording the call once its timing is known. */
  #settled<T, C extends CallTiming>(
    issuer: CallIssuer,
    outcome: T | Promise<T>,
    timing: () => C | Promise<C>,
    record: (timing: C) => Parameters<RankClock['record']>[0],
  ): Work<T> {
    return timedWork(issuer, outcome, timing, (t) => this.#clock.record(record(t)));
  }
}

/** `timing`'s own failure surfaces through the call's Work, never as an unhandled rejection. */
function quietly(timing: Promise<unknown>): void {
  timing.catch(() => undefined);
}

/** A transfer an emulated link timed (p2p/netem/): its time is the emulator's, its bandwidth what that gives. */
function emulatedTransfer(bytes: number, us: number) {
  return { us, algorithm: 'netem', protocol: 'link', busbwGBps: us > 0 ? bytes / us / 1e3 : 0 };
}

/** Settles (never rejects) when `outcome` does. */
function settled(outcome: unknown): Promise<void> {
  return outcome instanceof Promise
    ? outcome.then(
        () => undefined,
        () => undefined,
      )
    : Promise.resolve();
}
