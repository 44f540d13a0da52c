/**
 * Work<T>: the handle every communication call returns (docs/design.md decision 1).
 * It is PromiseLike, so `await work` is the blocking form; `done()` polls
 * without blocking; `then(fn)` chains and returns a Work, adopting a Work (or
 * any thenable) that `fn` returns.
 *
 * A rank keeps a ledger of its calls' Works (and of the Works its code chains
 * on them): when its main returns, a call nobody looked at (no await, then,
 * catch, finally, wait, done or failed; nor detach() on purpose), one still
 * pending, or one that failed with nobody looking is a mistake that would
 * otherwise pass silently, and closeLedger() reports it. Whether a call is
 * looked at does not depend on whether it already completed, so the verdict
 * is the same on every run, however fast the call was.
 */
import { UnfinishedWorkError } from './errors.ts';
import { RankLocal } from './rank-local.ts';

/** Failed Works nobody observed, kept for the audit; past this many only their count is. */
const MAX_UNOBSERVED_FAILURES = 64;
/**
 * Owed Works not yet looked at (or still pending) that the ledger keeps: a
 * program with more in flight at once has its later ones left out of the audit
 * rather than the ledger grow with them.
 */
const MAX_OWED = 4_096;
/** A ledger's list is swept of what no longer owes a look when it reaches this length (or twice what the last sweep kept). */
const FIRST_SWEEP_AT = 256;

/** A list that forgets, now and then, the entries `keep` no longer wants: at most MAX_OWED kept. */
class SweptList<T> {
  items: T[] = [];
  #sweepAt = FIRST_SWEEP_AT;

  constructor(
    readonly keep: (item: T) => boolean,
    readonly dropped: (item: T) => void = () => {},
  ) {}

  /** False when the list is full of entries still wanted: `item` is left out. */
  add(item: T): boolean {
    // A full list is swept before each refusal: entries looked at since may have made room.
    if (this.items.length >= Math.min(this.#sweepAt, MAX_OWED)) {
      this.items = this.items.filter((i) => {
        if (this.keep(i)) return true;
        this.dropped(i);
        return false;
      });
      this.#sweepAt = Math.max(FIRST_SWEEP_AT, 2 * this.items.length);
    }
    if (this.items.length >= MAX_OWED) return false;
    this.items.push(item);
    return true;
  }
}

/**
 * The hand-outs of one shared settled Work (see Work.resolved) in one ledger:
 * calls that completed with the same value share one Work, so a look cannot
 * tell which of them it was for, only that one more was looked at.
 */
interface Handouts {
  ledger: Ledger;
  /** In the ledger's shared list (until a sweep finds it looked at as often as handed out). */
  listed: boolean;
  handedOut: number;
  looks: number;
  /** Hand-outs since it was last looked at as often as handed out, and the first few of them. */
  since: number;
  first: () => string;
  more: Array<() => string> | undefined;
}
/** The calls named when several completed with one shared Work and fewer looks came back. */
const MAX_WAITING_NAMED = 8;

interface Ledger {
  /** Works the rank's code owes a look: its calls', and those it chained with then(fn) or finally(). */
  owed: SweptList<Work<unknown>>;
  /** Shared settled Works' hand-outs, while they may be owed a look. */
  shared: SweptList<Handouts>;
  /** Failed Works whose failure nobody saw: a call only polled with done(), a failure handler that threw. */
  unobserved: Set<Work<unknown>>;
  unobservedBeyondCap: number;
}

/** The ledger of the rank running now (a thread running several ranks keeps one per rank). */
const ledgers = new RankLocal<Ledger | undefined>(() => undefined);
/** Above zero while a layer over ThreadGroup issues calls it sees through itself. */
let internalDepth = 0;
const internalViews = new WeakMap<object, object>();

/**
 * `target` with every method call kept out of the ledger: what a layer built
 * on ThreadGroup (p2p, weight sync) calls through, since some of its calls
 * rightly outlive the user's Work (a send whose buffer the receiver still
 * reads) and its own Works are what the user must see through.
 */
export function internalCalls<T extends object>(target: T): T {
  let view = internalViews.get(target) as T | undefined;
  if (view) return view;
  const methods = new Map<PropertyKey, unknown>();
  view = new Proxy(target, {
    get(t, prop) {
      // The target as `this`: getters and methods read its private fields.
      const value = Reflect.get(t, prop, t);
      if (typeof value !== 'function') return value;
      let method = methods.get(prop);
      if (!method) {
        method = (...args: unknown[]) => {
          internalDepth++;
          try {
            return Reflect.apply(value, t, args);
          } finally {
            internalDepth--;
          }
        };
        methods.set(prop, method);
      }
      return method;
    },
  });
  internalViews.set(target, view);
  return view;
}

type Resolve<T> = (value: T | PromiseLike<T>) => void;
type Reject = (reason?: unknown) => void;
/** What Promise's constructor takes; a Work takes one too, so Promise's own statics (Work.resolve, ...) work on it. */
export type Executor<T> = (
  resolve: (value: T | PromiseLike<T>) => void,
  reject: (reason?: unknown) => void,
) => void;

/** The resolving functions of the Work being constructed from a promise (see the constructor). */
let capturedResolve: Resolve<never> | undefined;
let capturedReject: Reject | undefined;
function capture(resolve: Resolve<never>, reject: Reject): void {
  capturedResolve = resolve;
  capturedReject = reject;
}

/** The ledger's entry points, Work's private statics, set as the class is defined. */
let ledgerAccess: {
  track(work: Work<unknown>, describe: () => string): Work<unknown>;
  open(): void;
  close(): Promise<UnfinishedWorkError | undefined>;
  whenWaitedOn(work: Work<unknown>, waited: () => void): void;
};

/**
 * Puts a call's Work in this thread's ledger (a no-op outside a rank), under
 * `describe()`, e.g. `allReduce(float32[4], sum) #3 on group "world"`: for the
 * layers that make calls, not part of Work's public face.
 */
export function trackCall<W extends Work<unknown>>(work: W, describe: () => string): W {
  return ledgerAccess.track(work, describe) as W;
}

/**
 * Runs `waited` once, the first time the rank's code waits on `work`: an
 * await, then/catch/finally, Promise.resolve or wait() (not a done() or
 * failed() poll, nor detach()). Predict mode (predict/) advances the rank's
 * virtual clock to the call's predicted end there, where the program waits.
 */
export function whenWaitedOn(work: Work<unknown>, waited: () => void): void {
  ledgerAccess.whenWaitedOn(work, waited);
}

/** Starts this thread's ledger (a rank's context does, once). */
export function openLedger(): void {
  ledgerAccess.open();
}

/**
 * Ends the ledger when the rank's main has returned: an error naming the
 * calls nobody looked at, else those still pending, else the failed ones
 * nobody observed; undefined when the rank saw every call through.
 */
export function closeLedger(): Promise<UnfinishedWorkError | undefined> {
  return ledgerAccess.close();
}

/** True while a Work chains its own bookkeeping on itself: Promise's then reads `constructor`, which is no look by the rank's code. */
let ownBookkeeping = false;

/**
 * A Work is a Promise (derived promises, of then and the built-ins, are plain
 * Promises: then wraps its own in a Work), settled with the outcome of the
 * promise it is made from. Its `constructor` reads as Promise, so an `await`
 * takes it as it takes a native promise (no then() call, no extra turn); that
 * read, which every await and Promise.resolve makes, is how the ledger knows
 * the Work was looked at.
 */
export class Work<T> extends Promise<T> implements PromiseLike<T> {
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  static {
    // biome-ignore lint/complexity/noThisInStatic: the class's name is not bound yet where a static block is lowered (tsx, esbuild)
    Object.defineProperty(this.prototype, 'constructor', {
      get(this: Work<unknown>) {
        if (!ownBookkeeping) {
          this.#observe();
          this.#waitedOn();
        }
        return Promise;
      },
      configurable: true,
    });
    ledgerAccess = {
      track: (work, describe) => Work.#track(work, describe),
      open: () => Work.#openLedger(),
      close: () => Work.#closeLedger(),
      whenWaitedOn: (work, waited) => {
        work.#onWait = waited;
      },
    };
  }

  #settled = false;
  #failed = false;
  #error: unknown;
  /** Looked at by the rank's code: awaited, chained on, waited for, polled or detached. */
  #looked = false;
  /** Its failure (if it fails) reaches somebody: any look but a done() poll. */
  #observed = false;
  #detached = false;
  /** What the audit calls this Work: set for a call's Work and for Works chained on one. */
  #describe: (() => string) | undefined;
  /** A shared settled Work's hand-outs in the current ledger (counted, not listed: see Handouts). */
  #handouts: Handouts | undefined;
  /** See whenWaitedOn. */
  #onWait: (() => void) | undefined;

  constructor(source: PromiseLike<T> | Executor<T>) {
    super(typeof source === 'function' ? source : capture);
    if (typeof source !== 'function') {
      const resolve = capturedResolve as Resolve<T>;
      const reject = capturedReject as Reject;
      capturedResolve = capturedReject = undefined;
      // A promise is followed directly: resolving with it would take a turn more (the thenable job).
      if (source instanceof Promise) source.then(resolve, reject);
      else resolve(source);
    }
    if (this instanceof SettledWork) {
      this.#settled = true;
      return;
    }
    // Observing the rejection here keeps an un-awaited Work from crashing the
    // rank as an unhandled rejection; the error still reaches every wait().
    // Registered first, this runs before any handler a caller attaches.
    this.#bookkeep(
      () => {
        this.#settled = true;
      },
      (error: unknown) => {
        this.#settled = true;
        this.#failed = true;
        this.#error = error;
        const ledger = ledgers.get();
        if (!ledger || this.#observed || !this.#describe) return;
        if (ledger.unobserved.size < MAX_UNOBSERVED_FAILURES) ledger.unobserved.add(this as Work<unknown>);
        else ledger.unobservedBeyondCap++;
      },
    );
  }

  #bookkeep(onFulfilled: (value: T) => void, onRejected: (error: unknown) => void): void {
    ownBookkeeping = true;
    try {
      super.then(onFulfilled, onRejected);
    } finally {
      ownBookkeeping = false;
    }
  }

  static #track<W extends Work<unknown>>(work: W, describe: () => string): W {
    const ledger = ledgers.get();
    if (!ledger || internalDepth > 0) return work;
    work.#describe = describe;
    if (work instanceof SettledWork) Work.#handOut(work, ledger, describe);
    else ledger.owed.add(work);
    return work;
  }

  static #handOut(work: Work<unknown>, owing: Ledger, describe: () => string): void {
    let h = work.#handouts;
    if (h === undefined || h.ledger !== owing) {
      h = {
        ledger: owing,
        listed: false,
        handedOut: 0,
        looks: 0,
        since: 0,
        first: describe,
        more: undefined,
      };
      work.#handouts = h;
    }
    if (h.handedOut === h.looks) {
      h.since = 0;
      h.first = describe;
      h.more = undefined;
    } else if (h.since < MAX_WAITING_NAMED) (h.more ??= []).push(describe);
    h.handedOut++;
    h.since++;
    if (!h.listed) h.listed = owing.shared.add(h);
  }

  #observe(): void {
    this.#look();
    this.#observed = true;
    // Only failed Works are kept as unobserved (a look on every await would otherwise cost a set lookup).
    if (this.#failed) ledgers.get()?.unobserved.delete(this as Work<unknown>);
  }

  /**
   * A Work chained on this one (then, catch, finally) stands for the same call.
   * One chained with a failure handler (catch, or then with two callbacks: as
   * Promise.all and an await of a thenable chain) has handled it, and is
   * audited only if it fails unseen (its handler threw); one chained with
   * then(fn) or finally() carries the failure on, so the rank's code owes it a
   * look as it owed the call (a lint's "floating promise").
   */
  #chained<R>(promise: Promise<R>, handled: boolean, how: string): Work<R> {
    this.#observe();
    this.#waitedOn();
    const next = new Work(promise);
    const describe = this.#describe;
    const ledger = ledgers.get();
    if (describe === undefined || !ledger) return next;
    if (handled) next.#describe = describe;
    else {
      next.#describe = () => `the ${how} chained on ${describe()}`;
      ledger.owed.add(next);
    }
    return next;
  }

  /**
   * A Work that has `value` already: settled as it is made, with nothing to
   * wait for. A thenable is no value yet: its Work follows it.
   *
   * Settled Works are shared by value (each object's, kept as long as the
   * object lives, and one for undefined): a hot loop's calls complete with
   * the same tensor, or nothing, again and again, and making a Work costs
   * more than the rest of a small call's bookkeeping. The ledger counts a
   * shared Work's hand-outs and looks instead of marking it looked at.
   */
  static resolved<T>(value: T): Work<T> {
    const shared = settledWorks.get();
    if (value === undefined) {
      shared.void ??= new SettledWork(undefined);
      return shared.void as Work<T>;
    }
    if (typeof (value as { then?: unknown } | null)?.then === 'function') {
      return new Work(Promise.resolve(value as PromiseLike<T>));
    }
    if (typeof value !== 'object' || value === null) return new SettledWork<T>(value);
    let work = shared.byValue.get(value) as Work<T> | undefined;
    if (work === undefined) {
      work = new SettledWork<T>(value);
      shared.byValue.set(value, work);
    }
    return work;
  }

  static rejected<T = never>(error: unknown): Work<T> {
    return new Work<T>(Promise.reject(error));
  }

  /** Runs `fn` now and wraps its outcome, so a synchronous throw becomes a rejected Work. */
  static run<T>(fn: () => PromiseLike<T> | T): Work<T> {
    try {
      return new Work(Promise.resolve(fn()));
    } catch (error) {
      return Work.rejected<T>(error);
    }
  }

  #waitedOn(): void {
    const waited = this.#onWait;
    if (waited === undefined) return;
    this.#onWait = undefined;
    waited();
  }

  #look(): void {
    this.#looked = true;
    const h = this.#handouts;
    if (h !== undefined && h.looks < h.handedOut) h.looks++;
  }

  /** True once the operation finished, successfully or not (asking counts as looking at it, not at a failure). */
  done(): boolean {
    this.#look();
    return this.#settled;
  }

  /** True once the operation finished with an error (asking counts as looking at it). */
  failed(): boolean {
    this.#observe();
    return this.#failed;
  }

  wait(): Promise<T> {
    this.#observe();
    this.#waitedOn();
    return this;
  }

  /**
   * Fire and forget, on purpose: the rank's main may return without looking at
   * this Work, and its outcome, failure included, is nobody's. A detached call
   * still pending when main returns is waited for (within its timeout) before
   * the rank ends, so its peers get what it sends.
   */
  detach(): this {
    this.#detached = true;
    this.#observe();
    return this;
  }

  // biome-ignore lint/suspicious/noThenProperty: Work is deliberately PromiseLike (docs/design.md decision 1)
  override then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    // biome-ignore lint/suspicious/noExplicitAny: matches PromiseLike, so handlers may type the reason
    onRejected?: ((reason: any) => R2 | PromiseLike<R2>) | null,
  ): Work<R1 | R2> {
    return this.#chained(super.then(onFulfilled, onRejected), typeof onRejected === 'function', 'then()');
  }

  // biome-ignore lint/suspicious/noExplicitAny: as Promise.catch
  override catch<R = never>(onRejected: (reason: any) => R | PromiseLike<R>): Work<T | R> {
    return this.#chained(super.then(undefined, onRejected), true, 'catch()');
  }

  override finally(onFinally: () => void): Work<T> {
    const after = <V>(settle: () => V) => Promise.resolve(onFinally()).then(settle);
    return this.#chained(
      super.then(
        (value) => after(() => value),
        (error: unknown) =>
          after(() => {
            throw error;
          }),
      ),
      false,
      'finally()',
    );
  }

  /** Settles when this Work does, without counting as a look or chaining a Work. */
  #ended(): Promise<void> {
    return new Promise((resolve) =>
      this.#bookkeep(
        () => resolve(),
        () => resolve(),
      ),
    );
  }

  static #openLedger(): void {
    ledgers.set({
      owed: new SweptList((w) => !w.#looked || !w.#settled),
      shared: new SweptList(
        (h) => h.handedOut > h.looks,
        (h) => {
          h.listed = false;
        },
      ),
      unobserved: new Set(),
      unobservedBeyondCap: 0,
    });
  }

  /**
   * Ends the ledger when the rank's main has returned: an error naming the
   * calls nobody looked at, else those still pending, else the failed ones
   * nobody observed; undefined when the rank saw every call through. A turn
   * of the event loop first lets callbacks chained on calls already done run,
   * so a then() that throws is judged the same whether its call was done
   * before main returned or not; detached calls still pending are waited for.
   */
  static async #closeLedger(): Promise<UnfinishedWorkError | undefined> {
    const closing = ledgers.get();
    if (!closing) return undefined;
    await new Promise(setImmediate);
    ledgers.set(undefined);
    const owed = closing.owed.items.filter((w) => !w.#detached);
    const unlooked = owed.filter((w) => !w.#looked);
    const lines = unlooked.map(
      (w) => `${w.#describe!()}${w.#failed ? ` (failed with ${errorText(w.#error)})` : ''}`,
    );
    let count = unlooked.length;
    for (const h of closing.shared.items) {
      const missing = h.handedOut - h.looks;
      if (missing === 0) continue;
      count += missing;
      const names = [h.first, ...(h.more ?? [])].map((describe) => describe());
      lines.push(
        missing === names.length
          ? names.join('; ')
          : `${missing} of ${names.join(', ')}${h.since > names.length ? ', …' : ''} (calls that completed with the same result share one Work)`,
      );
    }
    if (count > 0) {
      return new UnfinishedWorkError(
        `the rank's main returned without looking at ${count} call(s) it started: ${listed(lines)}; ` +
          'await each Work (or chain on it, wait() for it, poll it with done()), ' +
          'or call detach() on one it fires and forgets on purpose',
      );
    }
    const pending = owed.filter((w) => !w.#settled);
    if (pending.length > 0) {
      return new UnfinishedWorkError(
        `the rank's main returned while ${pending.length} call(s) it started were still pending: ` +
          `${listed(pending.map((w) => w.#describe!()))}; await every Work (or its wait()) before returning`,
      );
    }
    const unseen = [...closing.unobserved];
    const beyond = closing.unobservedBeyondCap;
    if (unseen.length > 0 || beyond > 0) {
      const lines = unseen.map((w) => `${w.#describe!()} failed with ${errorText(w.#error)}`);
      if (beyond > 0) lines.push(`and ${beyond} more`);
      return new UnfinishedWorkError(
        `${unseen.length + beyond} call(s) failed and nobody observed it: ${listed(lines)}; ` +
          'await each Work, or handle its failure with .catch()',
      );
    }
    await Promise.all(closing.owed.items.filter((w) => w.#detached && !w.#settled).map((w) => w.#ended()));
    return undefined;
  }
}

function listed(items: readonly string[]): string {
  const shown = items.slice(0, 4);
  return items.length > shown.length ? `${shown.join('; ')}; …` : shown.join('; ');
}

function errorText(error: unknown): string {
  // Only to print a thrown value that is no Error.
  const e = error instanceof Error ? error : new Error(String(error));
  return `${e.name}: ${e.message.split('\n')[0]}`;
}

/**
 * The shared settled Works (Work.resolved), per rank: a shared Work's hand-outs are counted in one
 * ledger, so ranks that are tasks of one thread must not hand out each other's.
 */
const settledWorks = new RankLocal(() => ({
  void: undefined as Work<unknown> | undefined,
  byValue: new WeakMap<object, Work<unknown>>(),
}));

/** A Work made with its value (Work.resolved): settled as it is made, it cannot fail. */
class SettledWork<T> extends Work<T> {
  static {
    // Its own `constructor` would hide Work's, which an await must read.
    // biome-ignore lint/complexity/noThisInStatic: the class's name is not bound yet where a static block is lowered (tsx, esbuild)
    delete (this.prototype as { constructor?: unknown }).constructor;
  }

  constructor(value: T) {
    // Settled with the value itself (no executor closure per call): a promise would be followed instead.
    super(value as PromiseLike<T>);
  }
}
