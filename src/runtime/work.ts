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

/** Failed Works nobody observed, kept for the audit; past this many only their count is. */
const MAX_UNOBSERVED_FAILURES = 64;
/**
 * Owed Works not yet looked at (or still pending) that the ledger keeps: a
 * program with more in flight at once has its later ones left out of the audit
 * rather than the ledger grow with them.
 */
const MAX_OWED = 4_096;
/** The owed list is swept of Works looked at and done when it reaches this length (or twice what the last sweep kept). */
const FIRST_SWEEP_AT = 256;

interface Ledger {
  /** Works the rank's code owes a look: its calls', and those it chained with then(fn) or finally(). */
  owed: Work<unknown>[];
  sweepAt: number;
  /** Failed Works whose failure nobody saw: a call only polled with done(), a failure handler that threw. */
  unobserved: Set<Work<unknown>>;
  unobservedBeyondCap: number;
}

let ledger: Ledger | undefined;
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
    Object.defineProperty(this.prototype, 'constructor', {
      get(this: Work<unknown>) {
        if (!ownBookkeeping) this.#observe();
        return Promise;
      },
      configurable: true,
    });
  }

  #settled = false;
  #failed = false;
  #error: unknown;
  /** Looked at by the rank's code: awaited, chained on, waited for, polled or detached. */
  #looked = false;
  /** Its failure (if it fails) reaches somebody: any look but a done() poll. */
  #observed = false;
  #detached = false;
  /** In the ledger's owed list: a tracked call's Work, or one the rank's code chained on such with then(fn) or finally(). */
  #owed = false;
  /** What the audit calls this Work: set for a call's Work and for Works chained on one. */
  #describe: (() => string) | undefined;

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

  /**
   * Puts a call's Work in this thread's ledger (a no-op outside a rank), under
   * `describe()`, e.g. `allReduce(float32[4], sum) #3 on group "world"`.
   */
  static track<W extends Work<unknown>>(work: W, describe: () => string): W {
    if (!ledger || internalDepth > 0) return work;
    work.#describe = describe;
    Work.#owe(work);
    return work;
  }

  static #owe(work: Work<unknown>): void {
    const owing = ledger as Ledger;
    if (owing.owed.length >= owing.sweepAt) Work.#sweep(owing);
    if (owing.owed.length >= MAX_OWED) return;
    owing.owed.push(work);
    work.#owed = true;
  }

  #observe(): void {
    this.#looked = true;
    this.#observed = true;
    // Only failed Works are kept as unobserved (a look on every await would otherwise cost a set lookup).
    if (this.#failed) ledger?.unobserved.delete(this as Work<unknown>);
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
    const next = new Work(promise);
    const describe = this.#describe;
    if (describe === undefined || !ledger) return next;
    if (handled) next.#describe = describe;
    else {
      next.#describe = () => `the ${how} chained on ${describe()}`;
      Work.#owe(next);
    }
    return next;
  }

  /**
   * A Work that has `value` already: settled as it is made, with nothing to
   * wait for. A thenable is no value yet: its Work follows it.
   */
  static resolved<T>(value: T): Work<T> {
    if (typeof (value as { then?: unknown } | null)?.then === 'function') {
      return new Work(Promise.resolve(value as PromiseLike<T>));
    }
    return new SettledWork<T>(value);
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

  /** True once the operation finished, successfully or not (asking counts as looking at it, not at a failure). */
  done(): boolean {
    this.#looked = true;
    return this.#settled;
  }

  /** True once the operation finished with an error (asking counts as looking at it). */
  failed(): boolean {
    this.#observe();
    return this.#failed;
  }

  wait(): Promise<T> {
    this.#observe();
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

  /** Starts this thread's ledger (a rank's context does, once). */
  static openLedger(): void {
    ledger = { owed: [], sweepAt: FIRST_SWEEP_AT, unobserved: new Set(), unobservedBeyondCap: 0 };
  }

  /**
   * Ends the ledger when the rank's main has returned: an error naming the
   * calls nobody looked at, else those still pending, else the failed ones
   * nobody observed; undefined when the rank saw every call through. A turn
   * of the event loop first lets callbacks chained on calls already done run,
   * so a then() that throws is judged the same whether its call was done
   * before main returned or not; detached calls still pending are waited for.
   */
  static async closeLedger(): Promise<Error | undefined> {
    const closing = ledger;
    if (!closing) return undefined;
    await new Promise(setImmediate);
    ledger = undefined;
    const owed = closing.owed.filter((w) => !w.#detached);
    const unlooked = owed.filter((w) => !w.#looked);
    if (unlooked.length > 0) {
      const lines = unlooked.map(
        (w) => `${w.#describe!()}${w.#failed ? ` (failed with ${errorText(w.#error)})` : ''}`,
      );
      return new Error(
        `the rank's main returned without looking at ${unlooked.length} call(s) it started: ${listed(lines)}; ` +
          'await each Work (or chain on it, wait() for it, poll it with done()), ' +
          'or call detach() on one it fires and forgets on purpose',
      );
    }
    const pending = owed.filter((w) => !w.#settled);
    if (pending.length > 0) {
      return new Error(
        `the rank's main returned while ${pending.length} call(s) it started were still pending: ` +
          `${listed(pending.map((w) => w.#describe!()))}; await every Work (or its wait()) before returning`,
      );
    }
    const unseen = [...closing.unobserved];
    const beyond = closing.unobservedBeyondCap;
    if (unseen.length > 0 || beyond > 0) {
      const lines = unseen.map((w) => `${w.#describe!()} failed with ${errorText(w.#error)}`);
      if (beyond > 0) lines.push(`and ${beyond} more`);
      return new Error(
        `${unseen.length + beyond} call(s) failed and nobody observed it: ${listed(lines)}; ` +
          'await each Work, or handle its failure with .catch()',
      );
    }
    await Promise.all(closing.owed.filter((w) => w.#detached && !w.#settled).map((w) => w.#ended()));
    return undefined;
  }

  /** Keeps in the owed list only the Works still owing a look or still pending. */
  static #sweep(owing: Ledger): void {
    owing.owed = owing.owed.filter((w) => {
      const keep = !w.#looked || !w.#settled;
      if (!keep) w.#owed = false;
      return keep;
    });
    owing.sweepAt = Math.max(FIRST_SWEEP_AT, 2 * owing.owed.length);
  }
}

function listed(items: readonly string[]): string {
  const shown = items.slice(0, 4);
  return items.length > shown.length ? `${shown.join('; ')}; …` : shown.join('; ');
}

function errorText(error: unknown): string {
  const e = error instanceof Error ? error : new Error(String(error));
  return `${e.name}: ${e.message.split('\n')[0]}`;
}

/** A Work made with its value (Work.resolved): settled as it is made, it cannot fail. */
class SettledWork<T> extends Work<T> {
  static {
    // Its own `constructor` would hide Work's, which an await must read.
    delete (this.prototype as { constructor?: unknown }).constructor;
  }

  constructor(value: T) {
    // Settled with the value itself (no executor closure per call): a promise would be followed instead.
    super(value as PromiseLike<T>);
  }
}
