/**
 * NcclCommunicator: a group's NCCL communicator, created by the group's first
 * GPU call. Group rank 0 makes the unique id; it reaches the other members
 * through the group's TensorStore (the memory store for threads, the file
 * store for processes); then every member starts a non-blocking
 * ncclCommInitRank, which the caller polls, so the rank's event loop never
 * blocks while the members find each other.
 */

import { CollectiveMismatchError, CommTimeoutError, retold } from '../runtime/errors.ts';
import { Tensor } from '../tensor/tensor.ts';
import type { Backend, CallInfo, GroupView } from '../thread-group/backend.ts';
import { type CommHandle, NCCL_UNIQUE_ID_BYTES, type NcclLibrary, NcclResult } from './api.ts';
import { ncclResultError } from './nccl-result.ts';

type State =
  | { kind: 'idle' }
  | { kind: 'exchanging' }
  | { kind: 'initializing'; comm: CommHandle }
  | { kind: 'ready'; comm: CommHandle }
  | { kind: 'failed'; error: Error }
  | { kind: 'closed' };

export interface CommunicatorOptions {
  /** Carries the unique id from group rank 0 to the others (a StoreBackend of its own key space). */
  bootstrap: Backend;
  group: GroupView;
  /** Binds the calling thread to the rank's GPU (cudaSetDevice) and returns the NCCL bindings. */
  useDevice: () => NcclLibrary;
  /** Called when creation moves on without being polled (the id arrived, or its exchange failed). */
  onChange: () => void;
}

/** How often destroy checks on a non-blocking ncclCommFinalize. */
const FINALIZE_POLL_MS = 1;

export class NcclCommunicator {
  readonly #options: CommunicatorOptions;
  #state: State = { kind: 'idle' };

  constructor(options: CommunicatorOptions) {
    this.#options = options;
  }

  /** Whether the communicator is ready for calls. */
  get ready(): boolean {
    return this.#state.kind === 'ready';
  }

  /** Starts creating the communicator; `call` (the group's first GPU call) bounds the id exchange. */
  start(call: CallInfo): void {
    if (this.#state.kind !== 'idle') return;
    const { bootstrap, group, useDevice } = this.#options;
    let mine: Tensor | undefined;
    try {
      if (group.rank === 0)
        mine = Tensor.fromArray(useDevice().getUniqueId(), [NCCL_UNIQUE_ID_BYTES], 'uint8');
    } catch (error) {
      this.#state = { kind: 'failed', error: error as Error };
      return;
    }
    this.#state = { kind: 'exchanging' };
    const bootstrapCall: CallInfo = {
      seq: 0,
      signature: 'ncclUniqueId',
      timeoutMs: call.timeoutMs,
      checks: false,
    };
    bootstrap.broadcastAny(bootstrapCall, mine, 0).then(
      (id) => this.#init(id),
      (error: Error) => {
        if (this.#state.kind !== 'exchanging') return;
        // Of the bootstrap's class (a timeout, a failed peer), in words that say what it was for.
        const failure = retold(
          error,
          `the NCCL unique id did not reach group rank ${group.rank} from group rank 0: ${error.message}`,
        );
        this.#state = { kind: 'failed', error: failure };
        this.#options.onChange();
      },
    );
  }

  #init(id: Tensor): void {
    if (this.#state.kind !== 'exchanging') return;
    const { group, useDevice } = this.#options;
    try {
      if (id.dtype !== 'uint8' || id.numel !== NCCL_UNIQUE_ID_BYTES) {
        throw new CollectiveMismatchError(
          `the NCCL unique id from group rank 0 is ${id.describe()}, not ${NCCL_UNIQUE_ID_BYTES} bytes`,
        );
      }
      const comm = useDevice().commInitRank(group.size, id.data as Uint8Array, group.rank, {
        blocking: false,
      });
      this.#state = { kind: 'initializing', comm };
    } catch (error) {
      this.#state = { kind: 'failed', error: error as Error };
    }
    this.#options.onChange();
  }

  /**
   * The communicator once it is ready; undefined while it is being created.
   * Throws what made creation fail.
   */
  poll(): CommHandle | undefined {
    const state = this.#state;
    switch (state.kind) {
      case 'ready':
        return state.comm;
      case 'failed':
        throw state.error;
      case 'initializing': {
        const nccl = this.#options.useDevice();
        const status = nccl.commGetAsyncError(state.comm);
        if (status === NcclResult.inProgress) return undefined;
        if (status !== NcclResult.success) {
          const error = ncclResultError('ncclCommInitRank', status);
          nccl.commAbort(state.comm);
          this.#state = { kind: 'failed', error };
          throw error;
        }
        this.#state = { kind: 'ready', comm: state.comm };
        return state.comm;
      }
      default:
        return undefined;
    }
  }

  /**
   * ncclCommAbort: stops the communicator's work on every stream at once. Later
   * use fails with `reason`.
   */
  abort(reason: Error): void {
    const state = this.#state;
    this.#state = { kind: 'failed', error: reason };
    if (state.kind === 'initializing' || state.kind === 'ready')
      this.#options.useDevice().commAbort(state.comm);
  }

  /**
   * Finalizes and destroys a healthy communicator, waiting at most `timeoutMs`
   * for the finalize (it flushes work still queued); aborts one that is still
   * being created, failed finalizing or took too long. Blocking: teardown
   * runs in the same order on every rank (see ThreadGroupManager.destroyAll).
   */
  destroy(timeoutMs: number): void {
    const state = this.#state;
    this.#state = { kind: 'closed' };
    if (state.kind === 'initializing') this.#options.useDevice().commAbort(state.comm);
    if (state.kind !== 'ready') return;
    const nccl = this.#options.useDevice();
    try {
      nccl.commFinalize(state.comm);
      waitFinalized(nccl, state.comm, timeoutMs);
    } catch (error) {
      nccl.commAbort(state.comm);
      throw error;
    }
    nccl.commDestroy(state.comm);
  }
}

function waitFinalized(nccl: NcclLibrary, comm: CommHandle, timeoutMs: number): void {
  const deadline = performance.now() + timeoutMs;
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    const status = nccl.commGetAsyncError(comm);
    if (status === NcclResult.success) return;
    if (status !== NcclResult.inProgress) throw ncclResultError('ncclCommFinalize', status);
    if (performance.now() >= deadline) {
      throw new CommTimeoutError(
        `ncclCommFinalize did not finish within ${timeoutMs} ms (work still queued on the communicator?); it was aborted`,
      );
    }
    Atomics.wait(sleeper, 0, 0, FINALIZE_POLL_MS);
  }
}
