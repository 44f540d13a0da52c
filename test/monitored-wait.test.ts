/**
 * A monitored call's slow wait looks at its peers every peerCheckMs of its
 * call (src/thread-group/store-backend/monitored-wait.ts): PEER_CHECK_MS for
 * a call of an ordinary group, rarely for a group that says so (the start-up
 * barrier's, whose ranks are still starting), and a peer that left fails the
 * wait at its next look, unless it made its part of the call before it left;
 * likewise a receive from any rank (src/thread-group/store-backend/p2p.ts).
 */
import { describe, expect, it } from 'vitest';
import { RankMonitor } from '../src/debug/monitor.ts';
import { resolveDebugOptions } from '../src/debug/options.ts';
import { RankState, ThreadStatusBoard } from '../src/debug/status-board.ts';
import { CommTimeoutError, RankFailedError } from '../src/runtime/errors.ts';
import { type CallInfo, type GroupView, PEER_CHECK_MS } from '../src/thread-group/backend.ts';
import { waitMonitored, watchMonitored } from '../src/thread-group/store-backend/monitored-wait.ts';
import { firstMessage } from '../src/thread-group/store-backend/p2p.ts';

const group: GroupView = { id: 'g', name: 'world', rank: 0, size: 2, ranks: [0, 1] };

/**
 * Rank 0's call #0 on `g`, waiting at most `waitMs` and looking at its peers every `peerCheckMs`
 * (a barrier: which call it is matters not to the waits here).
 */
function monitoredCall(g: GroupView, board: ThreadStatusBoard, peerCheckMs: number, waitMs: number) {
  const names = g.ranks.map((r) => `rank-${r}`);
  const monitor = new RankMonitor(0, board, resolveDebugOptions(undefined), names);
  const record = monitor.begin(g.name, 0, g.size, 0, 'barrier', 'barrier()', 0, g.ranks.slice(1));
  monitor.running(record, performance.now());
  const focus = { groupId: g.id, groupName: g.name, seq: 0, members: g.ranks };
  const call: CallInfo = {
    seq: 0,
    signature: 'barrier()',
    timeoutMs: waitMs,
    debug: { monitor, record, focus, peerCheckMs },
  };
  return { monitor, call };
}

/** Group rank `rank` as its own thread would be: it made its calls (the test's part), then left its main function. */
function leaves(board: ThreadStatusBoard, rank: number): void {
  new RankMonitor(rank, board, resolveDebugOptions(undefined)).close();
}

/** Rank 0's wait in `call` on `g` for up to 30 s, waiting for `waitingFor`; `waitedFor` is each look at its peers. */
function waitOptions(g: GroupView, call: CallInfo, waitingFor: string, waitedFor: () => number[]) {
  return {
    group: g,
    call,
    abort: undefined,
    deadline: performance.now() + 30_000,
    waitingFor: () => waitingFor,
    waitedFor,
  };
}

/** Rank 0 waiting `waitMs` in a barrier for rank 1, its call checking every `peerCheckMs`: how many looks it took, and how it ended. */
async function wait(
  peerCheckMs: number,
  waitMs: number,
  board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2)),
) {
  const { monitor, call } = monitoredCall(group, board, peerCheckMs, waitMs);
  let looks = 0;
  // Each look tells the monitor whom the call waits for.
  const say = monitor.waiting.bind(monitor);
  monitor.waiting = (...args) => {
    looks++;
    say(...args);
  };
  const words = new Int32Array(new SharedArrayBuffer(4));
  const ended = await waitMonitored(words, 0, (value) => value === 1, {
    group,
    call,
    abort: undefined,
    deadline: performance.now() + waitMs,
    waitingFor: () => 'group rank 1',
    waitedFor: () => [1],
  }).catch((error: unknown) => error);
  return { looks, ended };
}

describe('a monitored slow wait', () => {
  it('looks at its peers every PEER_CHECK_MS, and not at all within a longer peerCheckMs', async () => {
    const often = await wait(PEER_CHECK_MS, 4 * PEER_CHECK_MS);
    expect(often.ended).toBeInstanceOf(CommTimeoutError);
    expect(often.looks).toBeGreaterThanOrEqual(1);
    const rarely = await wait(10_000, 4 * PEER_CHECK_MS);
    expect(rarely.ended).toBeInstanceOf(CommTimeoutError);
    expect(rarely.looks).toBe(0);
  });

  it('fails at its first look once the peer it waits for has left', async () => {
    const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2));
    board.setState(1, RankState.exited);
    const { ended } = await wait(PEER_CHECK_MS, 30_000, board);
    expect(String(ended)).toMatch(/rank 1/);
    expect(ended).not.toBeInstanceOf(CommTimeoutError);
  });

  /*
   * A peer's part of the call and its leaving can both fall between the
   * wait's look at whom it waits for and its look at who left: on a loaded
   * machine a thread is descheduled there for as long as the peer needs. The
   * peer then left, but not before making the call: it must not be told
   * "will never make this call" (a flaky 64-rank barrier did so).
   */
  it('is not failed by a peer that made its part of the call and left while it looked', async () => {
    const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2));
    const { call } = monitoredCall(group, board, PEER_CHECK_MS, 30_000);
    const words = new Int32Array(new SharedArrayBuffer(4));
    const ended = await waitMonitored(
      words,
      0,
      (value) => value === 1,
      waitOptions(group, call, 'group rank 1', () => {
        const missing = Atomics.load(words, 0) === 1 ? [] : [1];
        // Rank 1 arrives last, so the barrier completes; it returns and leaves its main function.
        Atomics.store(words, 0, 1);
        leaves(board, 1);
        return missing;
      }),
    ).catch((error: unknown) => error);
    expect(ended).toBeUndefined();
  });

  it('blames the peer that left without the call, not one that made it and left while it looked', async () => {
    const three: GroupView = { id: 'g', name: 'world', rank: 0, size: 3, ranks: [0, 1, 2] };
    const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(3));
    leaves(board, 2);
    const { call } = monitoredCall(three, board, PEER_CHECK_MS, 30_000);
    // Who has arrived in the barrier (rank 0 has); it completes only once all have.
    const arrived = new Int32Array(new SharedArrayBuffer(12));
    arrived[0] = 1;
    const ended = await waitMonitored(
      arrived,
      2,
      (value) => value === 1,
      waitOptions(three, call, 'group ranks 1, 2', () => {
        const missing = [1, 2].filter((p) => Atomics.load(arrived, p) === 0);
        // Rank 1 arrives (the barrier still waits for rank 2), returns from its call regardless, and leaves.
        Atomics.store(arrived, 1, 1);
        leaves(board, 1);
        return missing;
      }),
    ).catch((error: unknown) => error);
    expect(ended).toBeInstanceOf(RankFailedError);
    expect(String(ended)).toMatch(/waited for rank 2, which will never make this call/);
  });

  it('kept by a timer, is not failed by a peer that ended the wait and left while it looked', async () => {
    const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2));
    const { call } = monitoredCall(group, board, PEER_CHECK_MS, 30_000);
    let delivered = false;
    const outcome = await new Promise<unknown>((resolve) => {
      const stop = watchMonitored(
        waitOptions(group, call, 'group rank 1', () => {
          // Rank 1 sends what the wait waits for, and leaves.
          delivered = true;
          leaves(board, 1);
          return [1];
        }),
        () => {
          if (!delivered) return false;
          stop();
          resolve('ended');
          return true;
        },
        resolve,
      );
    });
    expect(outcome).toBe('ended');
  });
});

describe('a receive from any rank', () => {
  it('takes the message of a peer that sent it and left while it looked', async () => {
    const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2));
    const { call } = monitoredCall(group, board, PEER_CHECK_MS, 30_000);
    let sent = false;
    const received = await firstMessage([1], call, group, (p) => {
      if (sent) return `message from ${p}`;
      // Rank 1 sends just after this look found nothing, and leaves.
      sent = true;
      leaves(board, 1);
      return undefined;
    }).catch((error: unknown) => error);
    expect(received).toBe('message from 1');
  });

  it('fails at once when every peer left without sending', async () => {
    const board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2));
    leaves(board, 1);
    const { call } = monitoredCall(group, board, PEER_CHECK_MS, 30_000);
    const received = await firstMessage([1], call, group, () => undefined).catch((error: unknown) => error);
    expect(received).toBeInstanceOf(RankFailedError);
    expect(String(received)).toMatch(/every other rank left: it left its main function/);
  });
});
