/**
 * NetworkTensorStore.networkStats (what ctx.networkStats() reports across
 * nodes), on loopback: both ends of a connection count the same bytes, and a
 * value costs its payload plus a header, to its pair of ranks alone, whichever
 * way it was written (copied behind its header, or its own bytes after it).
 */
import { afterEach, expect, it } from 'vitest';
import type { NetworkTensorStore } from '../src/network-store/index.ts';
import type { NetworkStats } from '../src/runtime/network-stats.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { connectAll, listenOnLoopback } from './fixtures/network-job.ts';

/** A value's header and its finish: a few dozen bytes each (the key, shape and dtype), never a payload's worth. */
const HEADER_MAX_BYTES = 128;

const stores: NetworkTensorStore[] = [];
afterEach(() => {
  for (const store of stores.splice(0)) store.close();
});

async function job(size: number): Promise<NetworkTensorStore[]> {
  const members = await Promise.all(Array.from({ length: size }, (_, r) => listenOnLoopback(r, 'stats')));
  stores.push(...members);
  await connectAll(members);
  return members;
}

const sent = (s: NetworkStats, peer: number) => s.peers[peer]?.sentBytes ?? 0;
const received = (s: NetworkStats, peer: number) => s.peers[peer]?.receivedBytes ?? 0;

/** Waits until every pair's two ends agree (a finish may still be on its way), or fails naming the pair. */
async function settled(members: readonly NetworkTensorStore[]): Promise<NetworkStats[]> {
  const deadline = performance.now() + 2_000;
  for (;;) {
    const stats = members.map((m) => m.networkStats());
    const differing = members.flatMap((a) =>
      members
        .filter((b) => sent(stats[a.rank], b.rank) !== received(stats[b.rank], a.rank))
        .map((b) => [a, b]),
    );
    if (differing.length === 0) return stats;
    if (performance.now() > deadline) {
      const [a, b] = differing[0];
      throw new Error(
        `rank ${a.rank} sent rank ${b.rank} ${sent(stats[a.rank], b.rank)} bytes, ` +
          `which received ${received(stats[b.rank], a.rank)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function move(src: NetworkTensorStore, dst: NetworkTensorStore, key: string, nbytes: number) {
  await src.srcSet(key, Tensor.zeros([nbytes], 'uint8'), 1, { to: [dst.rank] });
  await dst.destGet(key, { from: src.rank });
  await dst.destFinishGet(key);
  await src.srcWaitUntilGetFinished(key);
}

it.each([
  ['empty', 0],
  ['small: copied behind its header', 1_000],
  ['large: its own bytes after the header', 1 << 20],
])('a %s value costs its payload plus a header, counted alike at both ends', async (_name, nbytes) => {
  const members = await job(3);
  const [a, idle, b] = members;
  const before = await settled(members);
  await move(a, b, `v${nbytes}`, nbytes);
  const after = await settled(members);
  const added = (from: number, to: number) => sent(after[from], to) - sent(before[from], to);
  const there = added(a.rank, b.rank);
  expect(there).toBeGreaterThan(nbytes);
  expect(there).toBeLessThanOrEqual(nbytes + HEADER_MAX_BYTES);
  // The finish back, and nothing between any other pair.
  expect(added(b.rank, a.rank)).toBeGreaterThan(0);
  expect(added(b.rank, a.rank)).toBeLessThanOrEqual(HEADER_MAX_BYTES);
  for (const other of [a, b]) {
    expect(added(idle.rank, other.rank)).toBe(0);
    expect(added(other.rank, idle.rank)).toBe(0);
  }
  // The totals are the peers' sums.
  for (const s of after) {
    const peers = Object.values(s.peers);
    expect(s.sentBytes).toBe(peers.reduce((sum, p) => sum + p.sentBytes, 0));
    expect(s.receivedBytes).toBe(peers.reduce((sum, p) => sum + p.receivedBytes, 0));
  }
});

it('a store before any connection reports zeros and no peers; a snapshot does not change afterwards', async () => {
  const alone = await listenOnLoopback(0, 'alone');
  stores.push(alone);
  expect(alone.networkStats()).toEqual({ sentBytes: 0, receivedBytes: 0, peers: {} });
  const members = await job(2);
  const snapshot = members[0].networkStats();
  const copy = structuredClone(snapshot);
  await move(members[0], members[1], 'k', 64);
  expect(snapshot).toEqual(copy);
});
