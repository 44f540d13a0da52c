/**
 * monitoredBarrier over a TensorStore (torch's gloo monitored_barrier): every
 * other rank publishes its arrival for group rank 0; rank 0 waits for each up
 * to the call's timeout, then publishes one verdict for the ranks that came:
 * empty when all did, else the failure message, so they fail at once with
 * rank 0's answer instead of timing out. Both
 * values sit on phase 0 and carry the call's signature, so a rank that made a
 * different call as this number fails every rank involved, as any call does.
 *
 * It does not wait for the rank's earlier calls (barrier does): finding which
 * rank is missing must not hang on a call that waits for that rank.
 */
import { CollectiveMismatchError, CommTimeoutError, RankFailedError } from '../../runtime/errors.ts';
import { Tensor } from '../../tensor/tensor.ts';
import { CallMismatchError, MONITORED_BARRIER_ROOT as ROOT } from '../backend.ts';
import { type Exchange, FINGERPRINT } from './exchange.ts';

/** Group rank 0's part; `timeoutMs` bounds its wait for every other rank. */
async function collect(x: Exchange, timeoutMs: number, waitAllRanks: boolean): Promise<void> {
  const waits = x.peers().map(async (p) => {
    try {
      await x.get(0, p);
      await x.finish(0, p);
      return undefined;
    } catch (error) {
      return { rank: p, error: error as Error };
    }
  });
  const failures = (await Promise.all(waits)).filter((f) => f !== undefined);
  const absent = failures.filter(
    (f) => f.error instanceof CommTimeoutError || f.error instanceof RankFailedError,
  );
  // A rank that made another call: its disagreement is the answer, not a missing rank.
  const other = failures.find((f) => !absent.includes(f));
  const reported = waitAllRanks ? absent : absent.slice(0, 1);
  const error = other?.error ?? (reported.length > 0 ? notPassed(x, reported, timeoutMs) : undefined);
  // Only the ranks that came read the verdict, so it waits for exactly them (they are waiting for it). One
  // that comes later finds it taken and learns the failure from this rank's status (peerFailure).
  const readers = x.peers().filter((p) => !absent.some((f) => f.rank === p));
  if (readers.length > 0) {
    await x.publish(0, error ? verdict(error) : FINGERPRINT, readers);
    const read = x.consumed(0);
    // A reader that made another call finishes it with its mismatch: this rank's error says more.
    await (error ? read.catch(() => {}) : read);
  }
  if (error) throw error;
}

function notPassed(
  x: Exchange,
  missing: ReadonlyArray<{ rank: number; error: Error }>,
  timeoutMs: number,
): CommTimeoutError {
  const ranks = missing.map((f) => f.rank);
  // A rank known to have left or failed is named with why; the others simply did not come in time.
  const reasons = missing
    .filter((f) => f.error instanceof RankFailedError)
    .map((f) => `\n  rank ${f.rank}: ${f.error.message.split('\n')[0]}`);
  return new CommTimeoutError(
    `${x.where()}: ${notPassedVerdict(
      ranks,
      ranks.map((r) => x.globalRank(r)),
      timeoutMs,
    )}${reasons.join('')}`,
  );
}

/** Rank 0's verdict on the group ranks that did not come in time, with their global ranks where those differ. */
export function notPassedVerdict(
  ranks: readonly number[],
  global: readonly number[],
  timeoutMs: number,
): string {
  const which = ranks.length === 1 ? `rank ${ranks[0]}` : `ranks ${ranks.join(', ')}`;
  const globalNote = global.some((g, i) => g !== ranks[i])
    ? ` (group ranks; global ${global.length === 1 ? 'rank' : 'ranks'} ${global.join(', ')})`
    : '';
  return `${which}${globalNote} failed to pass monitoredBarrier within ${timeoutMs} ms`;
}

/** What a rank that arrived fails with when rank 0 reports a failure: rank 0's words. */
export function reportedByRoot(where: string, globalRank: number, report: string): string {
  return `${where}: rank ${globalRank} arrived, but group rank ${ROOT} reports: ${report}`;
}

/** A failure as rank 0 answers it: a byte for its kind, so the others fail with the same kind, then its message. */
const KIND = { notPassed: 1, mismatch: 2, other: 3 } as const;

function verdict(error: Error): Tensor {
  const kind =
    error instanceof CommTimeoutError
      ? KIND.notPassed
      : error instanceof CollectiveMismatchError
        ? KIND.mismatch
        : KIND.other;
  return Tensor.fromArray(new Uint8Array([kind, ...Buffer.from(error.message, 'utf8')]), undefined, 'uint8');
}

/** Any other rank's part: arrive, then take rank 0's verdict. */
async function arrive(x: Exchange): Promise<void> {
  await x.publish(0, FINGERPRINT, [ROOT]);
  const answer = await x.get(0, ROOT);
  const bytes = answer.numel > 0 ? Buffer.from(answer.bytes()) : undefined;
  await x.finish(0, ROOT);
  if (bytes !== undefined) {
    const message = reportedByRoot(x.where(), x.globalRank(x.rank), bytes.subarray(1).toString('utf8'));
    if (bytes[0] === KIND.notPassed) throw new CommTimeoutError(message);
    if (bytes[0] === KIND.mismatch) throw new CallMismatchError(message, x.globalRank(ROOT));
    throw new RankFailedError(message, x.globalRank(ROOT));
  }
  await x.consumed(0);
}

/**
 * How long a rank other than 0 waits for the verdict, given the barrier's
 * timeout: rank 0 may arrive up to that long after it, then wait that long
 * for the others.
 */
export function verdictTimeoutMs(timeoutMs: number): number {
  return 2 * timeoutMs;
}

export function monitoredBarrier(x: Exchange, timeoutMs: number, waitAllRanks: boolean): Promise<void> {
  if (x.size === 1) return Promise.resolve();
  return x.rank === ROOT ? collect(x, timeoutMs, waitAllRanks) : arrive(x);
}
