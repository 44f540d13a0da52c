/**
 * RankContext for ranks that are threads of one process: a MemoryTensorStore
 * shared by the job, the world group, subgroups and the group manager. This
 * module builds what launch/spawnThreads starts in every rank thread (through src/thread-setup.ts).
 */

import { availableParallelism } from 'node:os';
import { isMainThread } from 'node:worker_threads';
import { releaseDeviceMemory } from '../cuda/device-memory.ts';
import { RankMonitor, rankMonitor, setRankMonitor } from '../debug/monitor.ts';
import { resolveDebugOptions } from '../debug/options.ts';
import { ThreadStatusBoard, type ThreadStatusShared } from '../debug/status-board.ts';
import type { JobOptions, RankEvents, RankIdentity } from '../launch/rank-setup.ts';
import { type MemoryStoreShared, MemoryTensorStore } from '../memory-store/memory-tensor-store.ts';
import { DEFAULT_ARENA_BYTES, REGION_ALIGN } from '../memory-store/region-arena.ts';
import { NcclBackend } from '../nccl/nccl-backend.ts';
import { type PredictClock, RankClock, setRankClock } from '../predict/rank-clock.ts';
import { loadTopology } from '../predict/topology.ts';
import type { AbortWord } from '../runtime/abort-word.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { setCurrentRank } from '../runtime/current-rank.ts';
import { errandsDone } from '../runtime/errands.ts';
import { InvalidStateError } from '../runtime/errors.ts';
import { FaultInjector, setRankFaults } from '../runtime/faults/injector.ts';
import { type NetworkStats, noNetworkStats } from '../runtime/network-stats.ts';
import { RankLocal } from '../runtime/rank-local.ts';
import { runAll } from '../runtime/run-all.ts';
import type { TensorStore } from '../runtime/tensor-store.ts';
import { tuneRankTiering } from '../runtime/v8-tiering.ts';
import { setSpinBudget } from '../runtime/wait.ts';
import { closeLedger, openLedger } from '../runtime/work.ts';
import type { Device } from '../tensor/dtype.ts';
import { adoptKernelModule, kernelModule } from '../tensor/simd-kernels.ts';
import { checkMembers, groupKeyPrefix } from '../thread-group/group-id.ts';
import { nodeIndexes } from '../thread-group/group-nodes.ts';
import { regionBytes } from '../thread-group/store-backend/call-region.ts';
import { mailboxBytes } from '../thread-group/store-backend/mailbox-memory.ts';
import { ThreadGroup } from '../thread-group/thread-group.ts';
import { ThreadGroupManager } from '../thread-group/thread-group-manager.ts';
import { type BackendChoice, chooseBackend, clockExchange } from './backend-choice.ts';
import { writePrediction } from './prediction-report.ts';
import { splitMembers, subgroupBlocks } from './subgroups.ts';

export interface RankContext extends RankIdentity {
  /** All ranks. */
  world: ThreadGroup;
  manager: ThreadGroupManager;
  /** The job's validated cluster config (spawnThreads' `config`), if it has one. */
  config?: ClusterConfig;
  /** MemoryTensorStore for thread ranks, FileTensorStore for process ranks. */
  store: TensorStore;
  /** A new group of these global ranks (torch's new_group); non-members get a group whose calls reject. */
  newGroup(ranks: number[], options?: { timeoutMs?: number; name?: string }): Promise<ThreadGroup>;
  /**
   * torch's new_subgroups: the job's ranks in consecutive blocks of
   * `groupSize` (which must divide the world size); this rank's block as a
   * group, and every block's global ranks.
   */
  newSubgroups(
    groupSize: number,
    options?: { timeoutMs?: number },
  ): Promise<{ subgroup: ThreadGroup; subgroups: number[][] }>;
  /**
   * torch's split_group: one group per list of `parent`'s group ranks (default
   * the world), its group ranks in the list's order (not sorted, unlike
   * torch); this rank's, or null for a rank in no list. Lists must not overlap.
   */
  splitGroup(splitRanks: number[][], options?: SplitGroupOptions): Promise<ThreadGroup | null>;
  /**
   * The bytes this rank sent and received over the network (the TCP
   * connections to ranks of other nodes, not shared memory) since
   * initProcess, frame headers included, in all and per peer global rank.
   * Zeros and no peers for a rank that never used the network (thread ranks).
   */
  networkStats(): NetworkStats;
  /**
   * In a job that predicts (spawnThreads' `predict`, ...): this rank's
   * virtual clock, moved on by `compute(us)`; undefined otherwise.
   */
  predict?: PredictClock;
  /**
   * Ends this rank's part: peers still waiting on it fail at once, naming `failure` when given. Once:
   * later calls return the first call's promise.
   */
  close(failure?: unknown): Promise<void>;
  /** close(): `await using ctx = await initProcess()` (Node 24 and later) closes the context at the block's end. */
  [Symbol.asyncDispose](): Promise<void>;
}

export interface SplitGroupOptions {
  /** The group whose ranks the lists name (default: the world). */
  parent?: ThreadGroup;
  timeoutMs?: number;
  name?: string;
}

interface JobShared {
  store: MemoryStoreShared;
  /** Every rank's status row, for hang reports and fast failure when a peer left. */
  status: ThreadStatusShared;
  /** The reduction kernels' compiled module (tensor/simd-kernels.ts), compiled once by the launcher. */
  kernels: object | null;
}

/** Groups of every rank whose regions a job's arena holds: the world and three more (newGroup, the manager's). */
const FULL_GROUPS_IN_ARENA = 4;
/** The arena's regions are addressed by int32 byte offsets. */
const MAX_ARENA_BYTES = 2 ** 30;

/**
 * Bytes of the job's region arena: room for a few groups of every rank (a
 * group of N ranks takes N² mailbox rings: 19 MiB at 64 ranks, 69 at 128),
 * at least the store's default. Only the pages of regions in use are backed.
 */
export function jobArenaBytes(worldSize: number): number {
  // Each of its two regions may start up to an alignment past the end of the one before.
  const fullGroup = regionBytes(worldSize) + mailboxBytes(worldSize) + 2 * REGION_ALIGN;
  return Math.min(MAX_ARENA_BYTES, Math.max(DEFAULT_ARENA_BYTES, FULL_GROUPS_IN_ARENA * fullGroup));
}

export function createJobShared(options: JobOptions): JobShared {
  return {
    store: MemoryTensorStore.createShared({}, jobArenaBytes(options.worldSize)),
    status: ThreadStatusBoard.createShared(options.worldSize),
    kernels: kernelModule(),
  };
}

export function wakeJob(shared: JobShared): void {
  MemoryTensorStore.wakeAll(shared.store);
}

/** The context of the rank running now. */
const current = new RankLocal<RankContext | undefined>(() => undefined);
/** Every open context of this thread: one, or one per rank task where a thread runs many ranks. */
const openContexts = new Set<RankContext>();

/**
 * A per-rank service that a layer above adds to every RankContext (p2p adds
 * `collective`), so this layer never imports upward. The value is built on
 * first access, so a service nobody uses costs nothing, and closed with the
 * context. The layer declares the field's type by augmenting RankContext.
 */
export interface ContextExtension<T> {
  key: string;
  create(ctx: RankContext): T;
  close?(value: T): void | Promise<void>;
}

const extensions: Array<ContextExtension<unknown>> = [];
const closers = new WeakMap<RankContext, Array<() => void | Promise<void>>>();

/** Registers an extension for this thread's contexts, open ones included (its module may load after them). */
export function extendRankContext<T>(extension: ContextExtension<T>): void {
  if (extensions.some((e) => e.key === extension.key)) {
    throw new InvalidStateError(`extendRankContext: "${extension.key}" is already registered`);
  }
  extensions.push(extension as ContextExtension<unknown>);
  for (const ctx of openContexts) installExtension(ctx, extension as ContextExtension<unknown>);
}

function installExtension(ctx: RankContext, extension: ContextExtension<unknown>): void {
  if (Object.hasOwn(ctx, extension.key)) {
    throw new InvalidStateError(`extendRankContext: RankContext already has a field "${extension.key}"`);
  }
  let value: unknown;
  let built = false;
  Object.defineProperty(ctx, extension.key, {
    enumerable: true,
    get() {
      if (!built) {
        built = true;
        value = extension.create(ctx);
        closers.get(ctx)?.push(() => extension.close?.(value));
      }
      return value;
    },
  });
}

/** This thread's rank context once built, for APIs whose contract takes none (DeviceMesh, createTensorPromise). */
export function currentRankContext(): RankContext | undefined {
  return current.get();
}

export async function createRankContext(
  identity: RankIdentity,
  shared: JobShared,
  abort: AbortWord,
  options: JobOptions,
  events?: RankEvents,
): Promise<RankContext> {
  // A thread that served an earlier job (rankTest's warm threads) must not inject that job's faults into this start-up.
  setRankFaults(undefined);
  adoptKernelModule(shared.kernels);
  setSpinBudget(identity.worldSize / availableParallelism());
  const store = new MemoryTensorStore(shared.store, {
    rank: identity.rank,
    abort,
    timeoutMs: options.collectiveTimeoutMs,
  });
  const board = new ThreadStatusBoard(shared.status);
  setRankMonitor(
    new RankMonitor(identity.rank, board, options.debug ?? resolveDebugOptions(undefined), identity.names),
  );
  const ctx = await buildRankContext(
    identity,
    store,
    options,
    undefined,
    options.tasks ? { abort } : undefined,
  );
  // After the start-up barrier: a fault's nth counts the rank's own calls only.
  setRankFaults(
    FaultInjector.forRank(identity.rank, options.faults, options.chaos, {
      abort,
      lost: (how) => events?.lost(how),
    }),
  );
  return ctx;
}

const STARTUP_TIMEOUT_MS = 60_000;
/**
 * How often a rank in the start-up barrier looks at the ranks it waits for: a
 * start shorter than this (most) makes no such check, since each cost a waiting
 * rank a status snapshot (its call site formatted) and a look at every peer's
 * row, which adds up in a large job's start.
 */
const STARTUP_PEER_CHECK_MS = 1_000;

/** A managed group as messages name it: its ranks, and their devices unless all are the CPU (one group per combination). */
function membersName(members: readonly number[], devices: readonly Device[]): string {
  const on = members.map((r) => devices[r]);
  return `ranks ${members.join(', ')}${on.every((d) => d === 'cpu') ? '' : ` on ${on.join(', ')}`}`;
}

/** A rank's context over any TensorStore: thread ranks and process ranks both build theirs here. */
export async function buildRankContext(
  identity: RankIdentity,
  store: TensorStore,
  options: JobOptions,
  onClose?: () => void | Promise<void>,
  tasks?: BackendChoice['tasks'],
): Promise<RankContext> {
  const { rank, worldSize } = identity;
  openLedger();
  const created = new Map<string, number>();
  /** Live groups on NCCL, in creation order: the same on every member, so close destroys them alike. */
  const ncclGroups = new Set<ThreadGroup>();
  // Worked out once: a store spanning nodes knows every rank's node; any other has them all on one.
  const nodeOf = store.nodeOf?.bind(store);
  const nodeIndex = nodeOf && nodeIndexes(Array.from({ length: worldSize }, (_, r) => nodeOf(r)));
  const clock = options.predict && new RankClock(rank, loadTopology(options.predict.topology));
  setRankClock(clock);

  function makeGroup(kind: string, members: readonly number[], name: string, timeoutMs: number): ThreadGroup {
    const memberList = members.join('.');
    // Members create a given member set in the same order, so this count agrees across them.
    const instance = created.get(kind + memberList) ?? 0;
    created.set(kind + memberList, instance + 1);
    const id = groupKeyPrefix(kind, memberList, instance);
    const groupRank = members.indexOf(rank);
    // The start-up barrier waits for ranks still starting, which it need not look at every 100 ms.
    const peerCheckMs = kind === 's' ? STARTUP_PEER_CHECK_MS : undefined;
    const nodes = nodeIndex && members.map((r) => nodeIndex[r]);
    const view = { id, name, rank: groupRank, size: members.length, ranks: members };
    // The twin where members exchange virtual clocks: the store's, whatever serves the group itself.
    const choice = { store, devices: identity.devices, timeoutMs, storeOnly: kind === 's', tasks };
    const predictExchange =
      clock && groupRank >= 0 && kind !== 's' ? clockExchange(view, `${id}~predict`, choice) : undefined;
    const info = {
      id,
      name,
      ranks: members,
      rank: groupRank,
      globalRank: rank,
      timeoutMs,
      peerCheckMs,
      nodes,
      predictExchange,
    };
    // The startup barrier is about the store's listeners: no communicator for it.
    const backend = groupRank >= 0 ? chooseBackend(view, choice) : undefined;
    const group = new ThreadGroup(info, backend);
    if (backend instanceof NcclBackend) {
      for (const g of ncclGroups) if (g.destroyed) ncclGroups.delete(g);
      ncclGroups.add(group);
    }
    return group;
  }

  const all = Array.from({ length: worldSize }, (_, r) => r);
  const world = makeGroup('w', all, 'world', options.collectiveTimeoutMs);
  // A direction group's kind names its direction: its id must differ from the plain group of the same members.
  const manager = new ThreadGroupManager(identity.devices, (members, _key, direction) =>
    makeGroup(
      direction ? `d${direction.from}>${direction.to}:` : 'm',
      members,
      membersName(members, identity.devices),
      options.collectiveTimeoutMs,
    ),
  );

  // A buffer announcement reaches only ranks already listening: nobody publishes before all listen.
  // A group of its own keeps this barrier out of the world's call numbers.
  // It waits for every rank's thread or process to start, which takes seconds on a loaded machine: a
  // short timeout meant for the calls must not fail a job whose ranks were merely slow to start.
  const startup = makeGroup('s', all, 'startup', Math.max(options.collectiveTimeoutMs, STARTUP_TIMEOUT_MS));
  await startup.barrier();
  // Past it every rank has started and loaded the library, under V8's own flags where its launcher kept
  // them: the job's calls begin here. A rank thread turns tiering on for them; a process rank keeps V8's
  // own (runtime/v8-tiering.ts).
  if (!isMainThread) tuneRankTiering();
  startup.destroy();

  const built: Array<() => void | Promise<void>> = [];
  let closing: Promise<void> | undefined;
  const closeRank = async (failure?: unknown): Promise<void> => {
    // A rank that returned without looking at a call, with one pending, or let one fail unseen, fails
    // here, and its peers are told.
    const audit = await closeLedger();
    await errandsDone();
    const mistake = failure === undefined ? audit : undefined;
    failure ??= mistake;
    // What follows is the rank's leaving, not its program: no call of it is predicted.
    clock?.stop();
    if (clock && options.predict && failure === undefined)
      await writePrediction(world, clock, options.predict);
    // Services built on the groups close first, newest first.
    for (const close of built.reverse()) await close();
    // Peers still waiting for this rank fail now, naming it, instead of at their timeout.
    rankMonitor()?.close(failure);
    setRankMonitor(undefined);
    setRankClock(undefined);
    setCurrentRank(undefined);
    current.set(undefined);
    openContexts.delete(ctx);
    try {
      // Communicators go in the same order on every rank (NCCL may deadlock otherwise): the
      // manager's in sorted key order, then the others newest first; device memory once none is in use.
      runAll([
        () => manager.destroyAll(),
        ...[...ncclGroups].reverse().map((group) => () => group.destroy()),
        () => world.destroy(),
        () => store.close(),
        releaseDeviceMemory,
      ]);
    } finally {
      await onClose?.();
    }
    if (mistake) throw mistake;
  };
  // The fields layers above add (ContextExtension) are installed right after.
  const ctx = {
    ...identity,
    world,
    manager,
    store,
    config: options.config,
    predict: clock,
    async newGroup(ranks, groupOptions = {}) {
      const members = checkMembers(ranks, worldSize, 'newGroup');
      const name = groupOptions.name ?? `group[${members.join(',')}]`;
      return makeGroup('g', members, name, groupOptions.timeoutMs ?? options.collectiveTimeoutMs);
    },
    async newSubgroups(groupSize, groupOptions = {}) {
      const subgroups = subgroupBlocks(worldSize, groupSize);
      const members = subgroups[Math.floor(rank / subgroups[0].length)];
      const timeoutMs = groupOptions.timeoutMs ?? options.collectiveTimeoutMs;
      return { subgroup: makeGroup('g', members, `group[${members.join(',')}]`, timeoutMs), subgroups };
    },
    async splitGroup(splitRanks, splitOptions = {}) {
      const parent = splitOptions.parent ?? world;
      if (!(parent instanceof ThreadGroup)) {
        throw new TypeError('splitGroup: parent must be a ThreadGroup of this rank');
      }
      const members = splitMembers(splitRanks, parent.ranks, parent.name).find((m) => m.includes(rank));
      if (!members) return null;
      const name = splitOptions.name ?? `group[${members.join(',')}]`;
      return makeGroup('g', members, name, splitOptions.timeoutMs ?? options.collectiveTimeoutMs);
    },
    networkStats() {
      return store.networkStats?.() ?? noNetworkStats();
    },
    close(failure?: unknown) {
      // Once: a second close (the runtime's after the rank's own, or `await using`'s) awaits the first.
      closing ??= closeRank(failure);
      return closing;
    },
    [Symbol.asyncDispose]() {
      return ctx.close();
    },
  } as RankContext;
  closers.set(ctx, built);
  // The rank's trace part carries its network bytes (the trace's network summary).
  const monitor = rankMonitor();
  if (monitor) monitor.networkStats = () => ctx.networkStats();
  for (const extension of extensions) installExtension(ctx, extension);
  current.set(ctx);
  openContexts.add(ctx);
  setCurrentRank({ rank, store });
  return ctx;
}
