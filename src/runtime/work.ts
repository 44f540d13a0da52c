/**
 * Work<T>: the handle every communication call returns (docs/design.md decision 1).
 * It is PromiseLike, so `await work` is the blocking form; `done()` polls
 * without blocking; `then(fn)` chains and returns a Work, adopting a Work (or
 * any thenable) that `fn` returns.
 */
export class Work<T> implements PromiseLike<T> {
  readonly #promise: Promise<T>;
  #settled = false;
  #failed = false;

  constructor(promise: PromiseLike<T>) {
    this.#promise = Promise.resolve(promise);
    // Observing the rejection here keeps an un-awaited Work from crashing the
    // rank as an unhandled rejection; the error still reaches every wait().
    this.#promise.then(
      () => {
        this.#settled = true;
      },
      () => {
        this.#settled = true;
        this.#failed = true;
      },
    );
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

  /** True once the operation finished with an error. */
  failed(): boolean {
    return this.#failed;
  }

  wait(): Promise<T> {
    return this.#promise;
  }

  // biome-ignore lint/suspicious/noThenProperty: Work is deliberately PromiseLike (docs/design.md decision 1)
  then<R1 = T, R2 = never>(
    onFulfilled?: ((value: T) => R1 | PromiseLike<R1>) | null,
    // biome-ignore lint/suspicious/noExplicitAny: matches PromiseLike, so handlers may type the reason
    onRejected?: ((reason: any) => R2 | PromiseLike<R2>) | null,
  ): Work<R1 | R2> {
    return new Work(this.#promise.then(onFulfilled, onRejected));
  }

  // biome-ignore lint/suspicious/noExplicitAny: as Promise.catch
  catch<R = never>(onRejected: (reason: any) => R | PromiseLike<R>): Work<T | R> {
    return new Work(this.#promise.catch(onRejected));
  }

  finally(onFinally: () => void): Work<T> {
    return new Work(this.#promise.finally(onFinally));
  }
}
