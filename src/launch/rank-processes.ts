/**
 * One node's ranks as child processes of its launcher: started with their
 * environment, their output prefixed with their global rank, their results
 * and failures collected. The first failure aborts the node's job (every
 * waiting rank is told who failed) and, after the grace period, stops the
 * ranks still running (SIGTERM, then SIGKILL). A rank that exits with
 * code 0 fails too when it left calls unfinished (early-exit.ts): its peers
 * may be waiting in them, and would otherwise wait their timeout. One that
 * exits with code 0 and nothing pending has done its part, closed or not
 * (as a torchrun worker that skips destroy_process_group has): peers waiting
 * for calls it never made are told by its status row that it left.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describeEarlyExit, type EarlyExit } from '../debug/early-exit.ts';
import { CommTimeoutError, RankFailedError } from '../runtime/errors.ts';
import { LaunchError } from './errors.ts';
import { failRunning, jobTimeoutMessage, type RankFailure } from './job-options.ts';
import { type RankReport, reviveError } from './rank-report.ts';
import { unpackTensors } from './tensor-transfer.ts';

export type OutputSink = (rank: number, line: string, stream: 'stdout' | 'stderr') => void;

export type ProcessMessage = { kind: 'start'; args: unknown } | RankReport;

export interface RankProcessesOptions {
  bootstrap: URL;
  execArgv: string[];
  scriptArgs: string[];
  /** This node's ranks, by global rank, in local rank order. */
  ranks: readonly number[];
  worldSize: number;
  names: readonly string[];
  /** The environment of the rank with this global rank. */
  env(rank: number): NodeJS.ProcessEnv;
  /** The entry's args, packed (packTensors). */
  args: unknown;
  sink: OutputSink;
  graceMs: number;
  /** Tells every rank of the node that the job is over (abortProcessJob). */
  abortRanks(message: string, failedRank: number | undefined): void;
  /** Told once, when a failure of this node's own aborts it, with the failures that did. */
  onOwnAbort(message: string, causes: readonly RankFailure[]): void;
  /** What the rank recorded when it exited with its context open, if it did (readEarlyExit). */
  earlyExit(rank: number): EarlyExit | undefined;
}

function exitDescription(
  code: number | null,
  signal: NodeJS.Signals | null,
  early: EarlyExit | undefined,
): string {
  if (signal) return `was killed by ${signal}`;
  return early ? describeEarlyExit(early) : `exited with code ${code}`;
}

function running(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

function prefixOutput(child: ChildProcess, rank: number, sink: OutputSink): void {
  for (const stream of ['stdout', 'stderr'] as const) {
    const source = child[stream];
    if (source)
      createInterface({ input: source, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) =>
        sink(rank, line, stream),
      );
  }
}

export class RankProcesses {
  /** By local rank (undefined for scripts without a default export). */
  readonly results: unknown[];
  /** Root cause first. */
  readonly failures: RankFailure[] = [];
  /** Resolves once every rank process has closed its output. */
  readonly closed: Promise<void>;
  /** By global rank; other nodes' ranks count as settled, since this launcher does not run them. */
  private readonly settled: boolean[];
  /**
   * Ranks settled by their exit before their report was heard, with the failure the exit made, if
   * it made one: Node reads a child's channel to its end after its 'exit' event, so a report sent
   * before the exit may come after it (before 'close'), and is still taken: a result, or the error
   * that tells what the exit's code does not.
   */
  private readonly exitedFirst = new Map<number, RankFailure | undefined>();
  private readonly children: ChildProcess[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private aborted = false;

  constructor(private readonly o: RankProcessesOptions) {
    this.results = new Array(o.ranks.length);
    this.settled = new Array<boolean>(o.worldSize).fill(true);
    for (const rank of o.ranks) this.settled[rank] = false;
    this.closed = Promise.all(o.ranks.map((rank, local) => this.start(rank, local))).then(() => {});
  }

  /** Ends every rank still running with `message`: the launcher was stopped (a LaunchError), or the job timed out. */
  stopRunning(message: string, kind: (text: string) => Error = (text) => new LaunchError(text)): void {
    const before = this.failures.length;
    failRunning(this.settled, this.failures, message, kind);
    this.abort(message, undefined, this.failures.slice(before));
  }

  timeOut(timeoutMs: number): void {
    this.stopRunning(jobTimeoutMessage(timeoutMs, this.settled), (text) => new CommTimeoutError(text));
  }

  /**
   * Another node failed first: its failures are the root cause, listed before
   * this node's; with none to name (a node that failed before its ranks
   * started, a lost rendezvous) the ranks still running fail with `message`.
   */
  stopForOtherNode(message: string, causes: readonly RankFailure[]): void {
    this.failures.unshift(...causes);
    if (causes.length === 0)
      failRunning(this.settled, this.failures, message, (text) => new RankFailedError(text, undefined));
    this.abort(message, causes[0]?.rank, undefined);
  }

  /** The launcher is leaving: SIGKILL for whatever still runs, and no stop left pending. */
  kill(): void {
    for (const timer of this.timers) clearTimeout(timer);
    for (const child of this.children) if (running(child)) child.kill('SIGKILL');
  }

  private fail(rank: number, error: Error): RankFailure {
    const failure = { rank, error };
    this.failures.push(failure);
    this.abort(`rank ${rank} (${this.o.names[rank]}) failed: ${error.name}: ${error.message}`, rank, [
      failure,
    ]);
    return failure;
  }

  /** `ownCauses`: this node's failures that abort it, for the other nodes; undefined when the cause came from one of them. */
  private abort(message: string, failedRank: number | undefined, ownCauses: RankFailure[] | undefined): void {
    if (this.aborted) return;
    this.aborted = true;
    if (ownCauses) this.o.onOwnAbort(message, ownCauses);
    this.o.abortRanks(message, failedRank);
    const signalRunning = (signal: NodeJS.Signals) => {
      for (const child of this.children) if (running(child)) child.kill(signal);
    };
    this.timers.push(setTimeout(() => signalRunning('SIGTERM'), this.o.graceMs));
    this.timers.push(setTimeout(() => signalRunning('SIGKILL'), 2 * this.o.graceMs));
  }

  private start(rank: number, local: number): Promise<void> {
    const { names } = this.o;
    const child = fork(this.o.bootstrap, this.o.scriptArgs, {
      execArgv: this.o.execArgv,
      env: this.o.env(rank),
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'advanced',
    });
    this.children.push(child);
    prefixOutput(child, rank, this.o.sink);
    return new Promise<void>((resolveClose) => {
      child.send({ kind: 'start', args: this.o.args } satisfies ProcessMessage, (error) => {
        // A child that died before reading its start message is reported by 'exit'.
        if (error && running(child)) child.kill('SIGKILL');
      });
      child.on('message', (report: RankReport) => {
        if (this.settled[rank] && !this.exitedFirst.has(rank)) return;
        this.settled[rank] = true;
        const exitFailure = this.exitedFirst.get(rank);
        this.exitedFirst.delete(rank);
        if (exitFailure) {
          if (report.kind === 'error') exitFailure.error = reviveError(report.error);
        } else if (report.kind === 'result') this.results[local] = unpackTensors(report.value);
        else this.fail(rank, reviveError(report.error));
      });
      child.on('error', (error) => {
        if (this.settled[rank]) return;
        this.settled[rank] = true;
        this.fail(rank, error);
      });
      child.on('close', () => resolveClose());
      child.on('exit', (code, signal) => {
        const early = signal ? undefined : this.o.earlyExit(rank);
        const failed = code !== 0 || signal !== null || (early !== undefined && early.calls.length > 0);
        if (!this.settled[rank] || (failed && !this.failures.some((f) => f.rank === rank))) {
          const unheard = !this.settled[rank];
          this.settled[rank] = true;
          const failure = failed
            ? this.fail(
                rank,
                new LaunchError(`rank ${rank} (${names[rank]}) ${exitDescription(code, signal, early)}`),
              )
            : undefined;
          if (unheard) this.exitedFirst.set(rank, failure);
        }
      });
    });
  }
}
