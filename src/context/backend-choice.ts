/**
 * Which backend serves a group: NCCL when every member has a GPU of its own,
 * the rank's TensorStore otherwise (CPU ranks, ranks sharing a GPU). The
 * choice lives here, above both backends, so neither knows the other.
 */
import { NcclBackend, ncclServes } from '../nccl/nccl-backend.ts';
import { boardMemory } from '../predict/board-memory.ts';
import { BOARD_SLOTS_BYTES, ClockBoard } from '../predict/clock-board.ts';
import { MessageStamps, STAMP_SLOTS_BYTES } from '../predict/message-stamps.ts';
import type { AbortWord } from '../runtime/abort-word.ts';
import type { TensorStore } from '../runtime/tensor-store.ts';
import type { Device } from '../tensor/dtype.ts';
import type { Backend, GroupView } from '../thread-group/backend.ts';
import { ReducedStamps, sentOrReduced } from '../thread-group/clock-meetings.ts';
import type { ClockExchange } from '../thread-group/predicted-calls.ts';
import { StoreBackend } from '../thread-group/store-backend/store-backend.ts';
import { TaskBackend } from '../thread-group/task-backend/task-backend.ts';

export interface BackendChoice {
  store: TensorStore;
  /** Every rank's device, by global rank. */
  devices: readonly Device[];
  /** How long destroying a communicator may take. */
  timeoutMs: number;
  /** A group that must not open a communicator and sends nothing point to point (the startup barrier). */
  storeOnly?: boolean;
  /**
   * Where every rank of the job is a task of this thread (spawnThreads' `threads: 1`): the job's abort
   * word. Their groups meet in the thread (TaskBackend), since a wait on shared memory would stop the
   * peers it waits for.
   */
  tasks?: { abort: AbortWord };
}

export function chooseBackend(view: GroupView, choice: BackendChoice): Backend {
  const { store, devices, timeoutMs } = choice;
  if (choice.tasks) return new TaskBackend(view, choice.tasks.abort);
  const nodeOf = store.nodeOf?.bind(store);
  const nodes = nodeOf && view.ranks.map((r) => nodeOf(r));
  // The start-up barrier sends nothing point to point: a mailbox would take N² rings of the job's arena.
  if (choice.storeOnly) return new StoreBackend(store, view, { mailbox: false });
  if (
    !ncclServes(
      view.ranks.map((r) => devices[r]),
      nodes,
    )
  )
    return new StoreBackend(store, view);
  return new NcclBackend(view, {
    device: devices[view.ranks[view.rank]],
    destroyTimeoutMs: timeoutMs,
    // NCCL serves the group's device calls: these see only some of its calls.
    fallback: new StoreBackend(store, view, { sharedRegion: false }),
    bootstrap: new StoreBackend(store, { ...view, id: `${view.id}~nccl` }, { sharedRegion: false }),
  });
}

/**
 * Where a group's members exchange virtual clocks in predict mode (`id`): for the collectives and
 * the point-to-point calls' stamps, boards in memory they all map where the store has it (threads:
 * one region; processes of one node: a file each), else a twin backend of the group
 * (thread-group/clock-meetings.ts), which also takes a stamp its board had no room for.
 */
export function clockExchange(view: GroupView, id: string, choice: BackendChoice): ClockExchange {
  const twinView = { ...view, id };
  const group = { ...view, timeoutMs: choice.timeoutMs };
  if (choice.tasks) {
    const twin = new TaskBackend(twinView, choice.tasks.abort);
    return { twin, meeting: sentOrReduced(twin, group) };
  }
  const board = boardMemory(choice.store, `${id}:board`, view, BOARD_SLOTS_BYTES);
  const stamps = board && boardMemory(choice.store, `${id}:stamps`, view, STAMP_SLOTS_BYTES);
  // With a board the twin carries no collective, so it takes no call region, and no mailbox: what
  // stamps it takes go through the keyed store.
  const unboarded = board === undefined;
  const twin = new StoreBackend(choice.store, twinView, { sharedRegion: unboarded, mailbox: unboarded });
  return {
    twin,
    meeting: board ? new ClockBoard(board, group) : new ReducedStamps(twin, group),
    stamps: stamps && new MessageStamps(stamps, view.rank, view.size),
  };
}
