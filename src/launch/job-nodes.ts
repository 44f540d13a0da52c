/**
 * The launchers of one job, one per node, meet in the rendezvous that node
 * 0's launcher serves: each announces itself (its rank count and devices) and
 * waits for the others. From then on a failure anywhere is recorded there once
 * (the first record wins: it is the root cause) and every launcher, watching
 * that key, stops its own node's ranks. A launcher killed with SIGKILL records
 * nothing, so node 0 watches the others' heartbeats and records the loss; the
 * others notice node 0's end by their connection closing, or by their
 * heartbeats going unanswered. At the end node 0 serves until every node is
 * done (or lost) and has read the job's verdict.
 */
import { requireSecretOffLoopback, SECRET_ENV } from '../rendezvous/auth.ts';
import { RendezvousClient } from '../rendezvous/client.ts';
import { RendezvousError, RendezvousTimeoutError } from '../rendezvous/errors.ts';
import { RendezvousServer } from '../rendezvous/server.ts';
import { CommTimeoutError, RankFailedError } from '../runtime/errors.ts';
import type { Device } from '../tensor/dtype.ts';
import { LaunchError } from './errors.ts';
import { launchSecret } from './process-env.ts';

/** Why the job stops, as recorded in the rendezvous for every launcher. */
export interface NodeFailure {
  /** The node that failed: whose launcher recorded it, or that was lost. */
  node: number;
  /** What the ranks waiting in the job are told (abortProcessJob). */
  reason: string;
  /** The ranks that failed there, root cause first, with their errors' class names and codes; none when the job had not started. */
  failures: { rank: number; name: string; message: string; code?: string }[];
}

/** What a launcher stopped by another node's failure throws: the reason, blaming that node's first failed rank. */
function otherNodeError(failure: NodeFailure): RankFailedError {
  return new RankFailedError(failure.reason, failure.failures[0]?.rank);
}

export interface JobNodesOptions {
  nnodes: number;
  nodeRank: number;
  /** This node's rank processes and their devices. */
  nproc: number;
  devices: readonly Device[];
  /** Where node 0's launcher serves the rendezvous (port 0: a free one, for a job of one node). */
  host: string;
  port: number;
  /** How long the launchers wait for each other. */
  joinTimeoutMs: number;
  /** Stops the wait for the other nodes (stopping the job once it runs is the launcher's). */
  signal?: AbortSignal;
}

const KEYS = {
  launcher: (node: number) => `tensorcomm/launcher/${node}`,
  heartbeat: (node: number) => `tensorcomm/heartbeat/${node}`,
  done: (node: number) => `tensorcomm/launcher-done/${node}`,
  left: (node: number) => `tensorcomm/launcher-left/${node}`,
  failed: 'tensorcomm/job-failed',
  /** Set by node 0 once every node is done: the recorded failure, or empty. */
  end: 'tensorcomm/job-end',
};

/** A launcher beats this often; node 0 declares one lost after LOST_AFTER_MS without a beat. */
const HEARTBEAT_MS = 1000;
const LOST_AFTER_MS = 5000;
/** Long waits (the failure watch, the end) are re-armed this often, so none is unbounded. */
const WATCH_MS = 60_000;
/** How often node 0's wait for the other nodes' end looks again at which are lost. */
const DONE_RECHECK_MS = 2000;
/** Node 0 waits this long for the others to read the verdict before it stops serving. */
const LEAVE_MS = 10_000;

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** `promise`, or a rejection once the signal aborts (what it stopped goes on, for its owner to close). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () =>
      reject(new LaunchError(`stopped (${String(signal.reason)}) while waiting for the other nodes`));
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
const seconds = (ms: number) => `${ms / 1000} s`;

export class JobNodes {
  /** Every rank's device, by global rank: each node's own list, in node order. */
  devices: Device[] = [];
  private failure: NodeFailure | undefined;
  private onOtherNode: ((failure: NodeFailure) => void) | undefined;
  /** Rejects when another node fails: what the waits of the start race. */
  private readonly stopped: Promise<never>;
  private stop: (error: Error) => void = () => {};
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly lost = new Set<number>();
  private closing = false;

  private constructor(
    private readonly o: JobNodesOptions,
    private readonly server: RendezvousServer | undefined,
    /** Node 0's rendezvous, where this node's launcher publishes or reads the job. */
    readonly client: RendezvousClient,
    private readonly secret: string | undefined,
  ) {
    this.stopped = new Promise<never>((_, reject) => {
      this.stop = reject;
    });
    this.stopped.catch(() => {}); // raced, never awaited alone
  }

  /**
   * Node 0 serves the rendezvous; every node connects, announces itself and
   * waits for all the others, within the join timeout.
   */
  static async join(o: JobNodesOptions): Promise<JobNodes> {
    const deadline = performance.now() + o.joinTimeoutMs;
    const secret = launchSecret(o.nnodes);
    // Every node, not node 0's server alone: the others would wait out the join timeout for it.
    requireSecretOffLoopback(o.host, secret, `set ${SECRET_ENV} to the same secret on every node`);
    const server =
      o.nodeRank === 0 ? await RendezvousServer.start({ host: o.host, port: o.port, secret }) : undefined;
    const port = server?.port ?? o.port;
    const connecting = RendezvousClient.connect({
      host: o.host,
      port,
      secret,
      timeoutMs: o.joinTimeoutMs,
    });
    let client: RendezvousClient;
    try {
      client = await untilAborted(connecting, o.signal);
    } catch (error) {
      connecting.then(
        (late) => late.close(), // connected after the stop
        () => {},
      );
      await server?.close();
      if (!(error instanceof CommTimeoutError)) throw error;
      throw new CommTimeoutError(
        `node rank 0, which serves it, never joined the rendezvous at ${o.host}:${port} within ${seconds(o.joinTimeoutMs)} (${error.message})`,
      );
    }
    const nodes = new JobNodes(o, server, client, secret);
    try {
      await untilAborted(nodes.meet(deadline), o.signal);
      return nodes;
    } catch (error) {
      await nodes.close(error);
      throw error;
    }
  }

  /** Where the ranks find the rendezvous (MASTER_ADDR, MASTER_PORT), and the secret they prove there. */
  get master(): { host: string; port: number; secret?: string } {
    return { host: this.client.host, port: this.client.port, secret: this.secret };
  }

  /** Rejects, naming the node, when another node fails first. */
  async untilOtherNodeFails<T>(promise: Promise<T>): Promise<T> {
    try {
      return await Promise.race([promise, this.stopped]);
    } catch (error) {
      // Node 0 closing is often the news of the failure it recorded, whose reply came just before: that tells more.
      await new Promise(setImmediate);
      if (this.failure && this.failure.node !== this.o.nodeRank) throw otherNodeError(this.failure);
      throw error;
    }
  }

  /** Told once when another node fails (or this one loses the rendezvous); at once if one already has. */
  onOtherNodeFailure(listener: (failure: NodeFailure) => void): void {
    this.onOtherNode = listener;
    if (this.failure && this.failure.node !== this.o.nodeRank) listener(this.failure);
  }

  /** Records this node's failure for every launcher, unless one is recorded already (which then is noted). */
  async record(failure: NodeFailure): Promise<void> {
    if (this.failure) return;
    const text = JSON.stringify(failure);
    try {
      this.note(JSON.parse(decode(await this.client.compareSet(KEYS.failed, '', text))));
    } catch {
      // The rendezvous is gone: the failure watch reports that.
    }
  }

  /**
   * Once this node's ranks have all exited: node 0 waits until every node's
   * have (or their node was lost) and publishes the verdict; the others wait
   * for it. A failure recorded anywhere is noted by the time this resolves.
   * Each other node hands node 0 `share` (its part of the job's trace, or
   * ''); node 0 resolves to the shares of the nodes that were not lost.
   */
  async finish(share = ''): Promise<string[]> {
    const { nodeRank } = this.o;
    let verdict: string;
    let shares: string[] = [];
    if (nodeRank === 0) {
      await this.othersDone();
      const done = this.others().filter((node) => !this.lost.has(node));
      shares = await Promise.all(done.map(async (node) => decode(await this.client.get(KEYS.done(node)))));
      this.stopTimers();
      verdict = (await this.client.check([KEYS.failed])) ? decode(await this.client.get(KEYS.failed)) : '';
      await this.client.set(KEYS.end, verdict);
      const staying = this.others().filter((node) => !this.lost.has(node));
      // A launcher that dies now has nothing left to read: the wait is only for the others' sake.
      if (staying.length > 0)
        await this.client.wait(staying.map(KEYS.left), { timeoutMs: LEAVE_MS }).catch(() => {});
    } else {
      // Asked before saying done, so the answer is parked before node 0 can end the job.
      [verdict] = await Promise.all([
        this.untilSet(KEYS.end),
        this.client.set(KEYS.done(nodeRank), share),
      ]).catch((error: Error) => {
        throw new RendezvousError(
          `node ${nodeRank}'s ranks are done, but the rendezvous at ${this.address}, which node 0's launcher serves, went away before the job's end: ${error.message}`,
        );
      });
      this.stopTimers();
      await this.client.set(KEYS.left(nodeRank), '');
    }
    if (verdict) this.note(JSON.parse(verdict));
    return shares;
  }

  /** Stops serving and watching; a launcher failing on its own (`error`) records it first, so the others stop too. */
  async close(error?: unknown): Promise<void> {
    if (error !== undefined && !this.failure && !this.closing) {
      const reason = `node ${this.o.nodeRank}'s launcher failed: ${(error as Error)?.message ?? String(error)}`;
      await this.record({ node: this.o.nodeRank, reason, failures: [] });
    }
    this.closing = true;
    this.stopTimers();
    this.client.close();
    await this.server?.close();
  }

  private get address(): string {
    return `${this.o.host}:${this.client.port}`;
  }

  private others(): number[] {
    return Array.from({ length: this.o.nnodes }, (_, node) => node).filter((n) => n !== this.o.nodeRank);
  }

  private async meet(deadline: number): Promise<void> {
    const { nnodes, nodeRank, nproc, devices, joinTimeoutMs } = this.o;
    this.watchFailures();
    await this.client.set(KEYS.launcher(nodeRank), JSON.stringify({ nproc, devices }));
    const keys = Array.from({ length: nnodes }, (_, node) => KEYS.launcher(node));
    try {
      const timeoutMs = Math.max(1, Math.ceil(deadline - performance.now()));
      await this.untilOtherNodeFails(this.client.wait(keys, { timeoutMs }));
    } catch (error) {
      if (!(error instanceof RendezvousTimeoutError)) throw error;
      const missing = error.missing.map((key) => key.slice(key.lastIndexOf('/') + 1));
      const reason = `node ranks ${missing.join(', ')} never joined the rendezvous at ${this.address} within ${seconds(joinTimeoutMs)}`;
      await this.record({ node: nodeRank, reason, failures: [] });
      throw new CommTimeoutError(reason);
    }
    const announced = await Promise.all(
      keys.map(
        async (key) => JSON.parse(decode(await this.client.get(key))) as { nproc: number; devices: Device[] },
      ),
    );
    // Every launcher reads the same announcements, so each refuses a mismatch by itself.
    const odd = announced.findIndex((a) => a.nproc !== nproc);
    if (odd >= 0) {
      throw new RangeError(
        `node ${odd} runs ${announced[odd].nproc} rank processes and node ${nodeRank} runs ${nproc}: every node needs the same --nproc-per-node`,
      );
    }
    this.devices = announced.flatMap((a) => a.devices);
    if (nodeRank !== 0) this.beat();
    else if (nnodes > 1) this.watchHeartbeats();
  }

  private note(failure: NodeFailure): void {
    if (this.failure) return;
    this.failure = failure;
    if (failure.node === this.o.nodeRank) return;
    this.stop(otherNodeError(failure));
    this.onOtherNode?.(failure);
  }

  /** Node 0's end is node 0's failure for the others. */
  private lose(why: string): void {
    this.note({
      node: 0,
      reason: `lost the rendezvous at ${this.address}, which node 0's launcher serves: ${why}`,
      failures: [],
    });
  }

  private watchFailures(): void {
    this.client.get(KEYS.failed, { timeoutMs: WATCH_MS }).then(
      (value) => this.note(JSON.parse(decode(value))),
      (error: Error) => {
        if (this.closing) return;
        if (error instanceof RendezvousTimeoutError) this.watchFailures();
        else this.lose(error.message);
      },
    );
  }

  /** A key's value, waiting for it as long as it takes, by waits of WATCH_MS. */
  private async untilSet(key: string): Promise<string> {
    for (;;) {
      try {
        return decode(await this.client.get(key, { timeoutMs: WATCH_MS }));
      } catch (error) {
        if (!(error instanceof RendezvousTimeoutError)) throw error;
      }
    }
  }

  private async othersDone(): Promise<void> {
    for (;;) {
      const waiting = this.others().filter((node) => !this.lost.has(node));
      if (waiting.length === 0) return;
      try {
        return await this.client.wait(waiting.map(KEYS.done), { timeoutMs: DONE_RECHECK_MS });
      } catch (error) {
        // A slice ran out: look again, leaving out the nodes lost meanwhile.
        if (!(error instanceof RendezvousTimeoutError)) throw error;
      }
    }
  }

  private every(ms: number, tick: () => void): void {
    const timer = setInterval(tick, ms);
    timer.unref();
    this.timers.push(timer);
  }

  private stopTimers(): void {
    for (const timer of this.timers) clearInterval(timer);
    this.timers.length = 0;
  }

  /** Nodes other than 0 beat; a beat unanswered for LOST_AFTER_MS means node 0 is gone. */
  private beat(): void {
    let since: number | undefined;
    this.every(HEARTBEAT_MS, () => {
      if (since === undefined) {
        since = performance.now();
        this.client.add(KEYS.heartbeat(this.o.nodeRank), 1).then(
          () => {
            since = undefined;
          },
          () => {}, // a lost connection is the failure watch's to report
        );
      } else if (performance.now() - since > LOST_AFTER_MS) {
        this.lose(`it has not answered for ${seconds(LOST_AFTER_MS)}`);
      }
    });
  }

  /** Node 0 reads every other node's beat count; one unchanged for LOST_AFTER_MS is lost, unless it is done. */
  private watchHeartbeats(): void {
    const last = new Map<number, { beats: number; at: number }>();
    let busy = false;
    this.every(HEARTBEAT_MS, () => {
      if (busy) return;
      busy = true;
      const now = performance.now();
      const live = this.others().filter((node) => !this.lost.has(node));
      Promise.all(
        live.map(async (node) => {
          const beats = await this.client.add(KEYS.heartbeat(node), 0);
          const seen = last.get(node);
          if (!seen || beats !== seen.beats) last.set(node, { beats, at: now });
          else if (now - seen.at > LOST_AFTER_MS && !(await this.client.check([KEYS.done(node)])))
            await this.loseNode(node);
        }),
      )
        .catch(() => {}) // closing
        .finally(() => {
          busy = false;
        });
    });
  }

  private async loseNode(node: number): Promise<void> {
    this.lost.add(node);
    const reason = `node ${node}'s launcher was lost: no heartbeat for ${seconds(LOST_AFTER_MS)} (killed, or its machine is gone)`;
    const first = node * this.o.nproc;
    // Its ranks ended with it, unreported: as a rank process that exited does.
    const { name, code } = new LaunchError(reason);
    const failures = Array.from({ length: this.o.nproc }, (_, i) => ({
      rank: first + i,
      name,
      message: reason,
      code,
    }));
    await this.record({ node, reason, failures });
  }
}
