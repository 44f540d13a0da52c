/**
 * Where predict mode's group members meet for their collectives' clocks
 * (context/backend-choice.ts clockExchange): on a board in memory they all
 * map (thread ranks' shared region; process ranks of one node, a file each),
 * else in a reduction on the group's twin (a group spanning nodes).
 */
import { describe, expect, it } from 'vitest';
import { clockExchange } from '../../src/context/backend-choice.ts';
import { NodeRoutedStore } from '../../src/context/node-routed-store.ts';
import { FileTensorStore } from '../../src/file-store/index.ts';
import { MemoryTensorStore } from '../../src/memory-store/memory-tensor-store.ts';
import { ClockBoard } from '../../src/predict/clock-board.ts';
import { MessageStamps } from '../../src/predict/message-stamps.ts';
import type { TensorStore } from '../../src/runtime/tensor-store.ts';
import { ReducedStamps } from '../../src/thread-group/clock-meetings.ts';
import { storeJobs } from '../fixtures/store-jobs.ts';

const { newJob, opened } = storeJobs('clock-exchange');

/** The clock exchange global rank 1 gets in a group of `ranks`. */
function exchangeOf(store: TensorStore, ranks: number[]) {
  const view = { id: 'g', name: 'g', rank: ranks.indexOf(1), size: ranks.length, ranks };
  return clockExchange(view, 'g~predict', { store, devices: [], timeoutMs: 5_000 });
}

/** The meeting global rank 1 gets in a group of `ranks`, and its messages' stamps' board. */
function meetingOf(store: TensorStore, ranks: number[]) {
  const { meeting, stamps } = exchangeOf(store, ranks);
  // Members that meet on a board leave their messages' stamps on one too.
  if (meeting instanceof ClockBoard) expect(stamps).toBeInstanceOf(MessageStamps);
  else expect(stamps).toBeUndefined();
  return meeting;
}

describe('clockExchange', () => {
  it('thread ranks meet on a board in their shared region', () => {
    const store = new MemoryTensorStore(MemoryTensorStore.createShared(), { rank: 1 });
    expect(meetingOf(store, [0, 1, 2])).toBeInstanceOf(ClockBoard);
    store.close();
  });

  it('process ranks of one node meet on a board of files', () => {
    const store = new FileTensorStore({ dir: newJob(), rank: 1 });
    opened.push(store);
    expect(meetingOf(store, [0, 1, 2])).toBeInstanceOf(ClockBoard);
  });

  it('a group spanning nodes meets in a reduction; its members of one node on a board', () => {
    const near = new FileTensorStore({ dir: newJob(), rank: 1 });
    opened.push(near);
    // Never called: a board or a reduction is chosen without a word to the other node.
    const far = new MemoryTensorStore(MemoryTensorStore.createShared(), { rank: 1 });
    const store = new NodeRoutedStore(near, far, ['a', 'a', 'b'], 1);
    expect(meetingOf(store, [0, 1, 2])).toBeInstanceOf(ReducedStamps);
    expect(meetingOf(store, [0, 1])).toBeInstanceOf(ClockBoard);
    far.close();
  });
});
