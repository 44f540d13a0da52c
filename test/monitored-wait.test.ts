/**
 * A monitored call's slow wait looks at its peers every peerCheckMs of its
 * call (src/thread-group/store-backend/monitored-wait.ts): PEER_CHECK_MS for
 * a call of an ordinary group, rarely for a group that says so (the start-up
 * barrier's, whose ranks are still starting), and a peer that left fails the
 * wait at its next look.
 */
import { describe, expect, it } from 'vitest';
import { RankMonitor } from '../src/debug/monitor.ts';
import { resolveDebugOptions } from '../src/debug/options.ts';
import { RankState, ThreadStatusBoard } from '../src/debug/status-board.ts';
import { CommTimeoutError } from '../src/runtime/errors.ts';
import { type CallInfo, type GroupView, PEER_CHECK_MS } from '../src/thread-group/backend.ts';
import { waitMonitored } from '../src/thread-group/store-backend/monitored-wait.ts';

const group: GroupView = { id: 'g', name: 'world', rank: 0, size: 2, ranks: [0, 1] };

/** Rank 0 waiting `waitMs` in a barrier for rank 1, its call checking every `peerCheckMs`: how many looks it took, and how it ended. */
async function wait(
  peerCheckMs: number,
  waitMs: number,
  board = new ThreadStatusBoard(ThreadStatusBoard.createShared(2)),
) {
  const monitor = new RankMonitor(0, board, resolveDebugOptions(undefined), ['rank-0', 'rank-1']);
  const record = monitor.begin('world', 0, 2, 0, 'barrier', 'barrier()', 0, [1]);
  monitor.running(record, performance.now());
  const focus = { groupId: group.id, groupName: group.name, seq: 0, members: group.ranks };
  const call: CallInfo = {
    seq: 0,
    signature: 'barrier()',
    timeoutMs: waitMs,
    debug: { monitor, record, focus, peerCheckMs },
  };
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
});
