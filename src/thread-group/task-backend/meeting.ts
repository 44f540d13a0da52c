/**
 * One collective call of a group whose members are tasks of one thread: each
 * member arrives with its arguments, and the last to arrive carries the call
 * out for all (reduces, copies out) and settles everyone's part. Nobody spins
 * or blocks, since a member blocking the thread would stop the very peers it
 * waits for; a member still waiting is watched by a timer (monitored-wait.ts)
 * for its timeout, the job's abort, and peers that failed or left.
 */
import type { AbortWord } from '../../runtime/abort-word.ts';
import { CommTimeoutError } from '../../runtime/errors.ts';
import { type CallInfo, COMPLETED, type GroupView } from '../backend.ts';
import { abandonedError, mismatchError, ranksText, timeoutError } from '../store-backend/call-failure.ts';
import { watchMonitored } from '../store-backend/monitored-wait.ts';

/** A member's part of the call: its own view of the group (its rank), its call, its arguments. */
export interface Member<A> {
  group: GroupView;
  call: CallInfo;
  args: A;
}

/** What the last arrival does with every member's part (in group-rank order): each member's result, if any. */
export type Complete<A, R> = (members: readonly Member<A>[]) => readonly R[] | undefined;

/** Why the call failed, in the words one member gets: `waiting` says whether it was waiting at the time. */
export type Failure = (member: Member<unknown>, waiting: boolean) => Error;

export interface ArriveOptions {
  /** The job's abort word, which every wait ends with. */
  abort: AbortWord | undefined;
  /** How long this member waits for the others. @defaultValue the call's timeout */
  waitMs?: number;
  /**
   * The failure when this member's wait runs out with group ranks `missing` absent (monitoredBarrier
   * names them); by default each waiting member times out naming them, and later ones fail naming it.
   */
  timedOut?: (member: Member<unknown>, missing: readonly number[]) => Failure;
}

interface Waiter {
  member: Member<unknown>;
  resolve(value: unknown): void;
  reject(error: Error): void;
  stop(): void;
}

export class Meeting {
  readonly #size: number;
  readonly #members: Array<Member<unknown> | undefined>;
  readonly #waiting = new Map<number, Waiter>();
  /** Members that arrived or gave up on the call: the meeting is over once all have. */
  #seen = 0;
  #first: Member<unknown> | undefined;
  #failure: Failure | undefined;
  readonly #over: () => void;

  /** `over`: called once every member has been through (the hub forgets the meeting). */
  constructor(size: number, over: () => void) {
    this.#size = size;
    this.#members = new Array(size);
    this.#over = over;
  }

  /**
   * This member's part. `waitMs` bounds its wait (the call's timeout unless the op says otherwise);
   * resolves to its result once every member arrived, at once (COMPLETED) for the last one.
   */
  arrive<A, R>(member: Member<A>, complete: Complete<A, R>, options: ArriveOptions): Promise<R> {
    this.#count();
    if (this.#failure) return Promise.reject(this.#failure(member, false));
    const first = this.#first;
    if (first && first.call.signature !== member.call.signature) {
      // Each member is told of the one whose call differs from its own.
      this.#fail((m) => {
        const other = m.call.signature === member.call.signature ? first : member;
        return mismatchError(m.group, m.call, m.call.signature, other.group.rank, other.call.signature);
      });
      return Promise.reject(this.#failure!(member, false));
    }
    this.#first ??= member;
    this.#members[member.group.rank] = member;
    if (this.#waiting.size + 1 < this.#size) return this.#wait(member, options);
    let results: readonly R[] | undefined;
    try {
      results = complete(this.#members as Member<A>[]);
    } catch (error) {
      this.#fail(() => error as Error);
      return Promise.reject(error);
    }
    for (const [rank, waiter] of this.#waiting) {
      waiter.stop();
      waiter.resolve(results?.[rank]);
    }
    this.#waiting.clear();
    return (results === undefined ? COMPLETED : Promise.resolve(results[member.group.rank])) as Promise<R>;
  }

  /** A member that failed the call's local checks: the others fail naming it, instead of waiting. */
  abandon(group: GroupView, error: Error): void {
    this.#count();
    if (this.#failure) return;
    const why = error.message.split('\n')[0];
    this.#fail((m) => abandonedError(m.group, m.call, group.rank, why));
  }

  #count(): void {
    if (++this.#seen === this.#size) this.#over();
  }

  #missing(): number[] {
    const missing: number[] = [];
    for (let p = 0; p < this.#size; p++) if (this.#members[p] === undefined) missing.push(p);
    return missing;
  }

  #wait<R>(member: Member<unknown>, options: ArriveOptions): Promise<R> {
    const { group, call } = member;
    const deadline = performance.now() + (options.waitMs ?? call.timeoutMs);
    return new Promise<R>((resolve, reject) => {
      let settled = false;
      const waiter: Waiter = {
        member,
        resolve: (value) => {
          settled = true;
          resolve(value as R);
        },
        reject: (error) => {
          settled = true;
          reject(error);
        },
        stop: () => {},
      };
      this.#waiting.set(group.rank, waiter);
      const waitingFor = () => ranksText(group, this.#missing());
      waiter.stop = watchMonitored(
        { group, call, abort: options.abort, deadline, waitingFor, waitedFor: () => this.#missing() },
        () => settled,
        (error) => {
          const own = error instanceof CommTimeoutError && options.timedOut;
          this.#fail(own ? own(member, this.#missing()) : this.#gaveUp(member, error));
        },
      );
    });
  }

  /** A waiting member's watch ended its wait: its peers fail too, each in its own words. */
  #gaveUp(member: Member<unknown>, error: Error): Failure {
    const why = error.message.split('\n')[0];
    return (m, waiting) => {
      if (m === member) return error;
      if (!waiting) return abandonedError(m.group, m.call, member.group.rank, why);
      // Those waiting with it waited for the same ranks: a timeout is theirs too.
      return error instanceof CommTimeoutError
        ? timeoutError(m.group, m.call, `waiting for ${ranksText(m.group, this.#missing())}`)
        : error;
    };
  }

  #fail(failure: Failure): void {
    this.#failure = failure;
    for (const waiter of this.#waiting.values()) {
      waiter.stop();
      waiter.reject(failure(waiter.member, true));
    }
    this.#waiting.clear();
  }
}
