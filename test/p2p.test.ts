import { beforeAll, describe, expect, it } from 'vitest';
import { spawnThreads } from '../src/index.ts';
import type { scenarios } from './fixtures/p2p.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/p2p.ts', import.meta.url));
// biome-ignore lint/suspicious/noExplicitAny: each scenario returns its own record shape
type Result = any;
const workers =
  (names = ['actor', 'rollout']) =>
  (entry: URL, args: object) =>
    spawnThreads<Result>(entry, { worldSize: names.length, names, args, timeoutMs: 50_000 });

/**
 * The actor–rollout scenarios run in one job, one after the other: roundtrip
 * first (it counts the manager's groups from none), mixing last (it leaves
 * channels broken on purpose, each on a group of its own).
 */
let pairs: Record<'roundtrip' | 'order' | 'mixing', Result[]>;
beforeAll(async () => {
  pairs = await fixture.runSteps(['roundtrip', 'order', 'mixing'], workers());
}, 120_000); // one job standing for three tests of 60 s each

describe('p2p between named workers', () => {
  it('round-trips every kind of value both ways, sync and async; fast path; caching; bad input', () => {
    const [actor, rollout] = pairs.roundtrip;
    const all = Array(14).fill(true);
    for (const r of [actor, rollout]) {
      expect(r.sameCollective).toBe(true);
      expect(r.managedBefore).toBe(0);
      expect(r.managedAfter).toBe(1);
      expect(r.cached).toBe(true);
      expect(r.named).toBe(true);
      expect(r.unknown).toMatch(/unknown worker "nobody"; known workers: actor, rollout/);
      expect(r.sync).toEqual(all);
      expect(r.async).toEqual(all);
      expect(r.nonContiguous).toMatch(
        /^TypeError: send to worker "\w+" \(rank \d\): value\.w: tensor float32\[3,2\] is not contiguous.*call \.contiguous\(\) first/,
      );
      expect(r.nonContiguousFast).toMatch(/^TypeError: sendTensor to worker .* not contiguous/);
      expect(r.recvNonContiguous).toMatch(/^TypeError: recvTensor from worker .* not contiguous/);
      expect(r.reserved).toMatch(/^TypeError: send .*reserved key/);
      expect(r.uncloneable).toMatch(/^TypeError: send .*cannot be structured-cloned/);
    }
    expect(rollout.fast).toEqual({
      inPlace: true,
      firsts: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      between: { between: true },
      last: 1023,
    });
    expect(actor.chained).toBe(2);
    expect(rollout.chained).toBe('sent');
    expect(actor.afterErrors).toBe('still fine');
  });

  it('keeps order: 1,000 un-awaited sends, then interleaved traffic in both directions', () => {
    const [actor, rollout] = pairs.order;
    expect(rollout.inOrder).toBe(true);
    expect(actor.interleaved).toBe(true);
    expect(rollout.interleaved).toBe(true);
  });

  it('detects send/recv mixed with sendTensor/recvTensor or broadcast instead of misreading', () => {
    const [actor, rollout] = pairs.mixing;
    expect(rollout.rawIntoRecv).toMatch(
      /P2PProtocolError: recv from worker "actor".*not a send\(\) header.*sendTensor/,
    );
    expect(rollout.brokenAfter).toBe(rollout.rawIntoRecv);
    expect(rollout.sendIntoRecvTensor).toMatch(
      /P2PProtocolError: recvTensor from worker "actor".*expects float32\[4\]/,
    );
    expect(actor.sendIntoRecvTensor).toMatch(/P2PProtocolError: send to worker "rollout"/);
    expect(rollout.sendIntoUint8).toMatch(/P2PProtocolError: recvTensor .*sent this message with send\(\)/);
    expect(rollout.broadcastIntoRecv).toMatch(
      /P2PProtocolError: recv from worker "actor".*expected a message sent with send\(\), but the peer used broadcast\(\)/,
    );
  });

  it('broadcasts to three workers; checks members and sources', async () => {
    const res: Result[] = await fixture.run('three', workers(['actor', 'rollout', 'critic']));
    for (const r of res) {
      expect(r.fromCritic).toBe(true);
      expect(r.ordered).toEqual([0, 1, 2, 3, 4]);
      expect(r.sendOnThree).toMatch(
        /RangeError: send .*pairs two workers, but the group has 3.*use broadcast/,
      );
      expect(r.badSrc).toMatch(/src "nobody" is not a member \(members: actor, critic, rollout\)/);
    }
    for (const r of res.slice(0, 2)) {
      expect(r.renamed).toMatch(
        /group "dup" already exists with workers actor, rollout, not actor, critic, rollout/,
      );
    }
    expect(res[2].notMember).toMatch(/this worker \("critic"\) is not one of actor, rollout/);
    expect(res[0].pair).toBe('sent');
    expect(res[1].pair).toBe('hello');
  });

  it('a peer that dies rejects pending receives naming it', async () => {
    const report = new SharedArrayBuffer(4096);
    await expect(fixture.run('dies', workers(), { report })).rejects.toThrow(/boom in rollout/);
    const seen = new TextDecoder().decode(new Uint8Array(report).slice()).replace(/\0+$/, '');
    expect(seen).toMatch(
      /^RankFailedError: recv from worker "rollout" \(rank 1\): .*rollout.*boom in rollout/,
    );
  });
});
