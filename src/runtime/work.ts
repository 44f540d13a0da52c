/**
 * Work<T>: the handle every communication call returns (docs/design.md decision 1).
 * It is PromiseLike, so `await work` is the blocking form; `done()` polls
 * without blocking; `then(fn)` chains and returns a Work, adopting a Work (or
 * any thenable) that `fn` returns.
 *
 * A rank keeps a ledger of its calls' Works (and of the Works chained on
 * them): a rank whose main returns while one is pending, or after one failed
 * with nobody looking (no await, then, catch or wait), has made a mistake that
 * would otherwise pass silently, so auditWorks() reports it.
 */

import { removeItem } from './remove-item.ts';

/** Failed Works nobody observed, kept for the audit; past this many only their count is. */
const MAX_UNOBSERVED_FAILURES = 64;

interface Ledger {
  /** Calls' Works still pending. */
  pending: Work<unknown>[];
  /** Failed Works (calls', and those chained on them) nobody has looked at yet. */
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

/**
 * A Work is a Promise (derived promises, of then and the built-ins, are plain
 * Promises: then wraps its own in a Work), settled with the outcome of the
 * promise it is made from. An `await` on one still goes through its then(),
 * since its constructor is not Promise: that is how a rank knows its failures
 * were looked at. A call that completed as it returned gets a SettledWork
 * instead, which an `await` takes as it takes a native promise (about half the
 * time and allocations): it cannot fail, so nothing needs to see it looked at.
 */
export class Work<T> extends Promise<T> implements PromiseLike<T> {
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  #settled = false;
  #failed = false;
  #error: unknown;
  #observed = false;
  /** In the ledger's pending calls (a tracked call's Work before it settled). */
  #pending = false;
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
    super.then(
      () => {
        this.#settled = true;
        if (this.#pending && ledger) removeItem(ledger.pending, this as Work<unknown>);
      },
      (error: unknown) => {
        this.#settled = true;
        this.#failed = true;
        this.#error = error;
        if (!ledger) return;
        if (this.#pending) removeItem(ledger.pending, this as Work<unknown>);
        if (this.#observed || !this.#describe) return;
        if (ledger.unobserved.size < MAX_UNOBSERVED_FAILURES) ledger.unobserved.add(this as Work<unknown>);
        else ledger.unobservedBeyondCap++;
      },
    );
  }

  /**
   * Puts a call's Work in this thread's ledger (a no-op outside a rank), under
   * `describe()`, e.g. `allReduce(float32[4], sum) #3 on group "world"`.
   */
  static track<W extends Work<unknown>>(work: W, describe: () => string): W {
    if (!ledger || internalDepth > 0) return work;
    work.#describe = describe;
    if (!work.#settled) {
      ledger.pending.push(work);
      work.#pending = true;
    }
    return work;
  }

  #observe(): void {
    this.#observed = true;
    // Only failed Works are kept as unobserved (a look on every await would otherwise cost a set lookup).
    if (this.#failed) ledger?.unobserved.delete(this as Work<unknown>);
  }

  /**
   * A Work chained on this one stands for the same call if it fails unseen
   * (a then() whose callback threw). Its pending state is not audited: an
   * `await` chains one too, and it settles a turn after the awaiting code resumes.
   */
  #chained<R>(promise: Promise<R>): Work<R> {
    this.#observe();
    const next = new Work(promise);
    next.#describe = this.#describe;
    return next;
  }

  /**
   * A Work that has `value` already: settled as it is made, with nothing to
   * wait for or audit. A thenable is no value yet: its Work follows it.
   *
   * Settled Works are shared by value (each object's, kept as long as the
   * object lives, and one for undefined): a hot loop's calls complete with
   * the same tensor, or nothing, again and again, and making a Work costs
   * more than the rest of a small call's bookkeeping. A settled Work holds
   * nothing of its call but the description reports name it by, which each
   * call that hands it out sets anew.
   */
  static resolved<T>(value: T): Work<T> {
    if (value === undefined) {
      settledVoid ??= new SettledWork(undefined);
      return settledVoid as Work<T>;
    }
    if (typeof (value as { then?: unknown } | null)?.then === 'function') {
      return new Work(Promise.resolve(value as PromiseLike<T>));
    }
    if (typeof value !== 'object' || value === null) return new SettledWork<T>(value);
    let work = settledByValue.get(value) as Work<T> | undefined;
    if (work === undefined) {
      work = new SettledWork<T>(value);
      settledByValue.set(value, work);
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

  /** True once the operation finished, successfully or not. */
  done(): boolean {
    return this.#settled;
  }

  /** True once the operation finished with an error (asking counts as looking at it). */
  failed(): boolean {
    if (this.#failed) this.#observe();
    return this.#failed;
  }

  wait(): Promise<T> {
    this.#observe();
    return this;
  }

  // biome-ignore lint/suspicious/noThenProperty: Work is deliberately PromiseLike (docs/design.md decision 1)
  override then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    // biome-ignore lint/suspicious/noExplicitAny: matches PromiseLike, so handlers may type the reason
    onRejected?: ((reason: any) => R2 | PromiseLike<R2>) | null,
  ): Work<R1 | R2> {
    return this.#chained(super.then(onFulfilled, onRejected));
  }

  // biome-ignore lint/suspicious/noExplicitAny: as Promise.catch
  override catch<R = never>(onRejected: (reason: any) => R | PromiseLike<R>): Work<T | R> {
    return this.#chained(super.then(undefined, onRejected));
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
    );
  }

  /** Starts this thread's ledger (a rank's context does, once). */
  static openLedger(): void {
    ledger = { pending: [], unobserved: new Set(), unobservedBeyondCap: 0 };
  }

  /**
   * Ends the ledger: an error naming the calls still pending, else the failed
   * ones nobody observed; undefined when the rank saw every call through.
   */
  static closeLedger(): Error | undefined {
    const closing = ledger;
    ledger = undefined;
    if (!closing) return undefined;
    const pending = [...closing.pending];
    if (pending.length > 0) {
      return new Error(
        `the rank's main returned while ${pending.length} call(s) it started were still pending: ` +
          `${listed(pending.map((w) => w.#describe!()))}; await every Work (or its wait()) before returning`,
      );
    }
    const unseen = [...closing.unobserved];
    const beyond = closing.unobservedBeyondCap;
    if (unseen.length === 0 && beyond === 0) return undefined;
    const lines = unseen.map((w) => `${w.#describe!()} failed with ${errorText(w.#error)}`);
    if (beyond > 0) lines.push(`and ${beyond} more`);
    return new Error(
      `${unseen.length + beyond} call(s) failed and nobody observed it: ${listed(lines)}; ` +
        'await each Work, or handle its failure with .catch()',
    );
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

let settledVoid: Work<unknown> | undefined;
const settledByValue = new WeakMap<object, Work<unknown>>();

/**
 * A Work made with its value (Work.resolved): its constructor reads as
 * Promise, which is what lets an `await` take it as a native promise.
 */
class SettledWork<T> extends Work<T> {
  static {
    Object.defineProperty(SettledWork.prototype, 'constructor', { value: Promise });
  }

  constructor(value: T) {
    // Settled with the value itself (no executor closure per call): a promise would be followed instead.
    super(value as PromiseLike<T>);
  }
}
