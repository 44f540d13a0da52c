/**
 * NcclWorkQueue: a group's GPU calls, in the order the group issued them, on
 * the backend's own non-blocking stream. Each call first waits for the
 * caller's earlier work on the legacy default stream (an event), then enqueues
 * its NCCL calls, and completes once an event recorded after them has passed.
 * One poller drives everything: communicator creation, non-blocking enqueues,
 * completion, asynchronous errors, peers that failed, and timeouts. Any
 * failure aborts the communicator and fails every pending call, and every
 * later one, since NCCL can promise nothing about a communicator after an error.
 */

import type { CudaRuntime, EventHandle, StreamHandle } from '../cuda/api.ts';
import { CommTimeoutError, InvalidStateError, RankFailedError, retold } from '../runtime/errors.ts';
import { runAll } from '../runtime/run-all.ts';
import type { Backend, CallInfo, GroupView } from '../thread-group/backend.ts';
import { type CommHandle, type NcclLibrary, NcclResult } from './api.ts';
import { NcclCommunicator } from './nccl-communicator.ts';
import { EventPool } from './nccl-event-pool.ts';
import { Poller } from './nccl-poller.ts';
import { ncclResultError } from './nccl-result.ts';

/** The legacy default stream, where device tensor operations run (synchronously for their caller). */
const LEGACY_STREAM: StreamHandle = 0n;
/** A pending call looks at its peers' status this often, so a peer that failed the call fails it at once. */
const PEER_CHECK_MS = 100;

export interface GpuBindings {
  cuda: CudaRuntime;
  nccl: NcclLibrary;
}

/** What a call's NCCL and copy calls run with. */
export interface IssueContext {
  readonly cuda: CudaRuntime;
  readonly nccl: NcclLibrary;
  readonly comm: CommHandle;
  readonly stream: StreamHandle;
}

/**
 * One call's work on the stream. The tensors it captures (the caller's, and
 * temporary buffers) stay alive until it completes.
 */
export interface DeviceOp {
  /** Enqueues the NCCL calls (and any copies they need first) on ctx.stream. */
  issue(ctx: IssueContext): void;
  /** Copies of the results, enqueued once NCCL has queued its calls (a non-blocking communicator may take a while). */
  after?(ctx: IssueContext): void;
  /**
   * Gives temporary buffers back to the allocator's cache once the call
   * completed. Not called when it failed: the aborted stream may still touch
   * them, so they wait for rank teardown.
   */
  release?(): void;
}

interface Pending {
  readonly label: string;
  readonly call: CallInfo;
  readonly op: DeviceOp;
  readonly deadline: number;
  state: 'queued' | 'enqueuing' | 'running';
  done: EventHandle | undefined;
  nextPeerCheck: number;
  resolve(): void;
  reject(error: Error): void;
}

interface StreamResources {
  stream: StreamHandle;
  events: EventPool;
  /** Recorded on the legacy stream before each call, for the backend stream to wait on. */
  callerWork: EventHandle;
}

export interface WorkQueueOptions {
  group: GroupView;
  /** Makes the rank's GPU current on this thread (cudaSetDevice); returns the bindings. */
  useDevice: () => GpuBindings;
  /** Carries the communicator's unique id between the members. */
  bootstrap: Backend;
}

export class NcclWorkQueue {
  readonly #group: GroupView;
  readonly #useDevice: () => GpuBindings;
  readonly #comm: NcclCommunicator;
  readonly #poller = new Poller(() => this.#progress());
  #pending: Pending[] = [];
  #resources: StreamResources | undefined;
  /** Why the communicator was aborted; every later call fails with it. */
  #failure: Error | undefined;
  #destroyed = false;

  constructor(options: WorkQueueOptions) {
    this.#group = options.group;
    this.#useDevice = options.useDevice;
    this.#comm = new NcclCommunicator({
      bootstrap: options.bootstrap,
      group: options.group,
      useDevice: () => options.useDevice().nccl,
      onChange: () => this.#poller.wake(),
    });
  }

  /** Queues `op` behind the group's earlier GPU calls; resolves once it has completed on the GPU. */
  submit(call: CallInfo, op: string, work: DeviceOp): Promise<void> {
    const label = this.#label(call, op);
    if (this.#destroyed) return Promise.reject(new InvalidStateError(`${label}: the group was destroyed`));
    if (this.#failure) {
      return Promise.reject(
        new InvalidStateError(
          `${label}: the group's NCCL communicator was aborted earlier: ${firstLine(this.#failure)}`,
          {
            cause: this.#failure,
          },
        ),
      );
    }
    return new Promise<void>((resolve, reject) => {
      const now = performance.now();
      this.#pending.push({
        label,
        call,
        op: work,
        deadline: now + call.timeoutMs,
        state: 'queued',
        done: undefined,
        nextPeerCheck: now + PEER_CHECK_MS,
        resolve,
        reject,
      });
      this.#comm.start(call);
      // Enqueue at once when the communicator is ready: the common case costs no event-loop turn.
      if (this.#progress()) this.#poller.wake();
    });
  }

  #label(call: CallInfo, op: string): string {
    // Point-to-point calls are matched per peer, not numbered in the group's collective order.
    const what = call.signature === 'p2p' ? op : call.signature;
    return `${what}${call.seq >= 0 ? ` call #${call.seq}` : ''} on group "${this.#group.name}"`;
  }

  /** One round of progress; returns whether calls are still pending. */
  #progress(): boolean {
    if (this.#pending.length === 0) return false;
    let blamed = this.#pending[0];
    try {
      const gpu = this.#useDevice();
      const comm = this.#comm.poll();
      if (comm !== undefined) {
        checkAsyncError(gpu.nccl, comm);
        const resources = this.#streamResources(gpu.cuda);
        for (const p of this.#pending) {
          if (p.state === 'running') continue;
          blamed = p;
          if (!this.#launch(p, { ...gpu, comm, stream: resources.stream }, resources)) break;
        }
        blamed = this.#pending[0];
        this.#complete(gpu, comm, resources.events);
      }
      this.#checkPeersAndDeadlines();
    } catch (error) {
      this.#abort(error as Error, blamed);
    }
    return this.#pending.length > 0;
  }

  #streamResources(cuda: CudaRuntime): StreamResources {
    if (!this.#resources) {
      const stream = cuda.streamCreate();
      const events = new EventPool(cuda);
      this.#resources = { stream, events, callerWork: events.take() };
    }
    return this.#resources;
  }

  /** Moves `p` on; returns false while NCCL is still queueing it (nothing may follow it yet). */
  #launch(p: Pending, ctx: IssueContext, { events, callerWork }: StreamResources): boolean {
    const { cuda, nccl, comm, stream } = ctx;
    if (p.state === 'queued') {
      cuda.eventRecord(callerWork, LEGACY_STREAM);
      cuda.streamWaitEvent(stream, callerWork);
      p.state = 'enqueuing';
      p.op.issue(ctx);
    }
    if (checkAsyncError(nccl, comm) === NcclResult.inProgress) return false;
    p.op.after?.(ctx);
    p.done = events.take();
    cuda.eventRecord(p.done, stream);
    p.state = 'running';
    return true;
  }

  /** Settles the calls whose completion event has passed (in stream order). */
  #complete({ cuda, nccl }: GpuBindings, comm: CommHandle, events: EventPool): void {
    let checked = false;
    while (this.#pending[0]?.state === 'running' && cuda.eventQuery(this.#pending[0].done!)) {
      // An error NCCL reports by now may be this call's: its results cannot be trusted.
      if (!checked) checkAsyncError(nccl, comm);
      checked = true;
      const p = this.#pending.shift()!;
      events.give(p.done!);
      p.op.release?.();
      p.resolve();
    }
  }

  #checkPeersAndDeadlines(): void {
    const now = performance.now();
    for (const p of this.#pending) {
      if (now >= p.deadline) {
        this.#abort(this.#timeoutError(p), p);
        return;
      }
      if (now >= p.nextPeerCheck) {
        p.nextPeerCheck = now + PEER_CHECK_MS;
        const failed = this.#peerFailure(p);
        if (failed) {
          this.#abort(failed, p);
          return;
        }
      }
    }
  }

  /** A member that already failed this call will never take part in it. */
  #peerFailure(p: Pending): RankFailedError | undefined {
    const debug = p.call.debug;
    if (!debug || p.call.seq < 0) return undefined;
    debug.monitor.waiting(debug.record, 'the NCCL call on every member');
    for (const peer of this.#group.ranks) {
      if (peer === this.#globalRank) continue;
      const failure = debug.monitor.peerFailure(peer, debug.focus.groupId, p.call.seq);
      if (failure)
        return new RankFailedError(`${p.label}: rank ${peer} failed this call: ${failure.message}`, peer);
    }
    return undefined;
  }

  get #globalRank(): number {
    return this.#group.ranks[this.#group.rank];
  }

  #timeoutError(p: Pending): CommTimeoutError {
    const waitingFor = this.#comm.ready
      ? 'the NCCL call to finish (every member must make it, in the same order)'
      : "the group's NCCL communicator to be created (every member creates it in its first GPU call on the group)";
    const debug = p.call.debug;
    const report = debug && p.call.seq >= 0 ? `\n${debug.monitor.describeRanks(debug.focus)}` : '';
    return new CommTimeoutError(
      `${p.label}: rank ${this.#globalRank} timed out after ${p.call.timeoutMs} ms waiting for ${waitingFor}; ` +
        `the communicator was aborted${report}`,
    );
  }

  /** Aborts the communicator and fails every pending call: `culprit` with `reason`, the others naming it. */
  #abort(reason: Error, culprit: Pending): void {
    if (!(reason instanceof CommTimeoutError) && !(reason instanceof RankFailedError)) {
      reason.message = `${culprit.label}: ${reason.message}`;
    }
    this.#failure = reason;
    try {
      this.#comm.abort(reason);
    } catch (error) {
      reason.message += ` (ncclCommAbort failed too: ${(error as Error).message})`;
    }
    const pending = this.#pending;
    this.#pending = [];
    for (const p of pending) {
      if (p === culprit) p.reject(reason);
      else p.reject(followerError(p.label, reason));
    }
  }

  /**
   * Fails what is still pending and releases the communicator (finalized and
   * destroyed when healthy, waiting at most `timeoutMs`; else aborted), the
   * stream and the events.
   */
  destroy(timeoutMs: number): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    const pending = this.#pending;
    this.#pending = [];
    const resources = this.#resources;
    this.#resources = undefined;
    runAll([
      () => {
        if (pending.length > 0) this.#comm.abort(new InvalidStateError('the group was destroyed'));
      },
      () => this.#comm.destroy(timeoutMs),
      () => {
        if (resources) this.#useDevice().cuda.streamDestroy(resources.stream);
      },
      () => resources?.events.destroy(),
      () => {
        for (const p of pending)
          p.reject(new InvalidStateError(`${p.label}: the group was destroyed while the call was pending`));
      },
    ]);
  }
}

/** The communicator's state: success, or inProgress while NCCL still queues a call; an error throws. */
function checkAsyncError(nccl: NcclLibrary, comm: CommHandle): number {
  const status = nccl.commGetAsyncError(comm);
  if (status !== NcclResult.success && status !== NcclResult.inProgress) {
    throw ncclResultError('ncclCommGetAsyncError', status);
  }
  return status;
}

/** The error of a call that was pending when another one made the communicator abort: of the reason's class. */
function followerError(label: string, reason: Error): Error {
  const message = `${label}: the group's NCCL communicator was aborted: ${firstLine(reason)}`;
  if (reason instanceof CommTimeoutError) return new CommTimeoutError(message);
  return retold(reason, message);
}

/** The cause without its hang report (the call that failed carries that). */
function firstLine(error: Error): string {
  return error.message.split('\n')[0];
}
