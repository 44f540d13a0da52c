/**
 * Collectives that hand a rank others' values (allGather, allGatherInto,
 * broadcast, gather, scatter, allToAll) ask the store to land each in its place
 * (TensorStore.landIn), so a store that can write values in place (between
 * processes, across nodes) makes one copy per value, not two. Thread ranks
 * over their memory store, wrapped to land values as such a store would and
 * to record where it was asked to.
 */
import { expect } from 'vitest';
import { type RankContext, Tensor } from '../src/index.ts';
import type { StoreEntry, TensorStore } from '../src/runtime/tensor-store.ts';
import { rankTest } from '../src/testing/index.ts';
import { StoreBackend } from '../src/thread-group/store-backend/store-backend.ts';
import { ThreadGroup } from '../src/thread-group/thread-group.ts';

/** Where a landIn wish asked a value to go: the buffer and byte range. */
interface Wish {
  from: number;
  buffer: ArrayBufferLike;
  byteOffset: number;
  byteLength: number;
}

/** `store` landing values as a cross-process store does: copied into the wish, handed out over it. */
function landingStore(store: TensorStore, wishes: Wish[]): TensorStore {
  const landings = new Map<string, Tensor>();
  const land = async (key: string, entry: StoreEntry): Promise<StoreEntry> => {
    const into = landings.get(key);
    if (!into) return entry;
    landings.delete(key);
    into.bytes().set(entry.tensor.bytes());
    return { ...entry, tensor: into };
  };
  return {
    srcSet: (key, tensor, consumers, options) => store.srcSet(key, tensor, consumers, options),
    srcWaitUntilGetFinished: (key, options) => store.srcWaitUntilGetFinished(key, options),
    destGet: async (key, options) => (await land(key, await store.destGetEntry(key, options))).tensor,
    destGetEntry: async (key, options) => land(key, await store.destGetEntry(key, options)),
    destFinishGet: (key, options) => store.destFinishGet(key, options),
    landIn(key, into, { from }) {
      const bytes = into.bytes();
      wishes.push({ from, buffer: bytes.buffer, byteOffset: bytes.byteOffset, byteLength: bytes.byteLength });
      landings.set(key, into);
      return () => landings.delete(key);
    },
    close: () => {},
  };
}

function groupOver(ctx: RankContext, wishes: Wish[]): ThreadGroup {
  const ranks = Array.from({ length: ctx.worldSize }, (_, r) => r);
  const view = { id: 'landing', name: 'landing', rank: ctx.rank, size: ctx.worldSize, ranks };
  return new ThreadGroup(
    { ...view, globalRank: ctx.rank, timeoutMs: 10_000 },
    new StoreBackend(landingStore(ctx.store, wishes), view),
  );
}

function sameRange(wish: Wish, t: Tensor): boolean {
  const bytes = t.bytes();
  return wish.buffer === bytes.buffer && wish.byteOffset === bytes.byteOffset && wish.byteLength === t.nbytes;
}

rankTest(
  'allGather lands each peer value in its output, allGatherInto in its slice',
  { worldSize: 3 },
  async (ctx) => {
    const wishes: Wish[] = [];
    const group = groupOver(ctx, wishes);
    const input = Tensor.full([2, 5000], ctx.rank + 1, 'float32');
    const outputs = [0, 1, 2].map(() => Tensor.zeros([2, 5000], 'float32'));
    await group.allGather(outputs, input);
    expect(outputs.map((t) => [t.toArray()[0], t.toArray()[9999]])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    const peers = [0, 1, 2].filter((p) => p !== ctx.rank);
    expect(wishes.map((w) => w.from)).toEqual(peers);
    for (const wish of wishes) expect(sameRange(wish, outputs[wish.from])).toBe(true);

    wishes.length = 0;
    const output = Tensor.zeros([6, 5000], 'float32');
    await group.allGatherInto(output, input);
    const got = output.toArray() as number[];
    expect([got[0], got[19_999], got[20_000], got[29_999]]).toEqual([1, 2, 3, 3]);
    for (const wish of wishes) expect(sameRange(wish, output.narrow(0, 2 * wish.from, 2))).toBe(true);
    expect(wishes).toHaveLength(2);
    group.destroy();
  },
);

rankTest(
  'broadcast, gather and scatter land what a rank receives in its tensor',
  { worldSize: 3 },
  async (ctx) => {
    const wishes: Wish[] = [];
    const group = groupOver(ctx, wishes);
    const t = Tensor.full([10_000], ctx.rank === 1 ? 7 : 0, 'float32');
    await group.broadcast(t, { src: 1 });
    expect(t.toArray()[9999]).toBe(7);
    expect(wishes.map((w) => w.from)).toEqual(ctx.rank === 1 ? [] : [1]);
    for (const wish of wishes) expect(sameRange(wish, t)).toBe(true);

    wishes.length = 0;
    const mine = Tensor.full([10_000], ctx.rank + 1, 'float32');
    const gatherList = ctx.rank === 2 ? [0, 1, 2].map(() => Tensor.zeros([10_000], 'float32')) : undefined;
    await group.gather(mine, { dst: 2, gatherList });
    if (gatherList) {
      expect(gatherList.map((g) => g.toArray()[9999])).toEqual([1, 2, 3]);
      expect(wishes.map((w) => w.from)).toEqual([0, 1]);
      for (const wish of wishes) expect(sameRange(wish, gatherList[wish.from])).toBe(true);
    } else expect(wishes).toEqual([]);

    wishes.length = 0;
    const piece = Tensor.zeros([10_000], 'float32');
    const scatterList =
      ctx.rank === 0 ? [0, 1, 2].map((r) => Tensor.full([10_000], 10 + r, 'float32')) : undefined;
    await group.scatter(piece, { src: 0, scatterList });
    expect(piece.toArray()[9999]).toBe(10 + ctx.rank);
    expect(wishes.map((w) => w.from)).toEqual(ctx.rank === 0 ? [] : [0]);
    for (const wish of wishes) expect(sameRange(wish, piece)).toBe(true);
    group.destroy();
  },
);

rankTest('allToAllSingle lands each peer part in its rows of the output', { worldSize: 3 }, async (ctx) => {
  const wishes: Wish[] = [];
  const group = groupOver(ctx, wishes);
  const input = Tensor.full([3 * 4000], ctx.rank + 1, 'float32');
  const output = Tensor.zeros([3 * 4000], 'float32');
  await group.allToAllSingle(output, input);
  const got = output.toArray() as number[];
  expect([got[0], got[4000], got[11_999]]).toEqual([1, 2, 3]);
  expect(wishes.map((w) => w.from)).toEqual([0, 1, 2].filter((p) => p !== ctx.rank));
  for (const wish of wishes) expect(sameRange(wish, output.narrow(0, 4000 * wish.from, 4000))).toBe(true);
  group.destroy();
});
