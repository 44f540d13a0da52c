/** Network emulation: exact link accounting, queueing, broadcast charged once, latency, one real-delay run. */
import { describe, expect, it } from 'vitest';
import { type ClusterConfig, loadClusterConfig, spawnThreads } from '../src/index.ts';
import { NetEmulator } from '../src/p2p/netem/net-emulator.ts';
import type { scenarios } from './fixtures/netem.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('./fixtures/netem.ts', import.meta.url));
/** A job of these workers under `config`, with `args` for its scenario. */
const workers = (names: string[], config: ClusterConfig) => (entry: URL, args: object) =>
  spawnThreads<Result>(entry, { worldSize: names.length, names, args, config, timeoutMs: 60_000 });
// biome-ignore lint/suspicious/noExplicitAny: each scenario returns its own record shape
type Result = any;
const MiB = 2 ** 20;

const net = (mode: 'account' | 'real', groups: Record<string, unknown>, latency: unknown[] = []) =>
  loadClusterConfig({ cluster: { net_emulation: { mode, groups, latency } } });
const link = (workers: string[], up: number, down = up) => ({
  workers,
  uplink_mbps: up,
  downlink_mbps: down,
});

describe('NetEmulator (account mode)', () => {
  const config = net('account', { fast: link(['a', 'b'], 8), slow: link(['c'], 8, 4) }, [
    { from: 'fast', to: 'slow', one_way_ms: 30 },
  ]).netEmulation!;

  it('charges bytes / rate, queues sends on one link, and adds one-way latency both ways', () => {
    const e = new NetEmulator(config, 'a', ['a', 'b', 'c']);
    expect(e.charge('send', ['b'], 1_000_000)).toEqual([1]);
    expect(e.charge('send', ['b'], 1_000_000)).toEqual([2]);
    // c's downlink (4 Mbit/s) is the bottleneck; the uplink is busy only for its own 1 s.
    expect(e.charge('send', ['c'], 1_000_000)).toEqual([2 + 2 + 0.03]);
    expect(e.report()).toMatchObject({
      messages: 3,
      wireBytes: 3_000_000,
      predictedS: 4.03,
      uplinkFreeAtS: 3,
    });
    const back = new NetEmulator(config, 'c', ['a', 'b', 'c']);
    expect(back.charge('send', ['a'], 500_000)).toEqual([0.5 + 0.03]); // c's uplink 8, a's downlink 8
  });

  it('a broadcast holds the uplink once and is done when the slowest receiver has it', () => {
    const e = new NetEmulator(config, 'a', ['a', 'b', 'c']);
    expect(e.charge('broadcast', ['b', 'c'], 1_000_000)).toEqual([1, 2.03]);
    expect(e.report()).toMatchObject({ uplinkFreeAtS: 1, predictedS: 2.03 });
    expect(e.report().transfers[0]).toMatchObject({ kind: 'broadcast', doneS: 2.03, startS: 0 });
  });

  it('refuses a job whose workers are not all in a group, or a group naming strangers', () => {
    expect(() => new NetEmulator(config, 'a', ['a', 'b', 'c', 'd'])).toThrow(/worker\(s\) d are in no group/);
    expect(() => new NetEmulator(config, 'a', ['a', 'b'])).toThrow(
      /group "slow" names worker "c", which is not in this job/,
    );
  });
});

describe('network emulation between workers', () => {
  it('account mode: 1 MiB at 8 Mbit/s takes ≈1.05 s, a queued one ≈2.1 s; a broadcast is charged once', async () => {
    const config = net('account', { ab: link(['a', 'b'], 8), c: link(['c'], 8, 4) });
    const [a, b, c]: Result[] = await fixture.run('netem', workers(['a', 'b', 'c'], config));
    const [first, second, broadcast] = a.transfers;
    const header = first.wireBytes - MiB; // what the header adds on the wire
    expect(header).toBeGreaterThan(24);
    expect(header).toBeLessThan(200);
    expect(first.doneS).toBe(((MiB + header) * 8) / 8e6);
    expect(first.doneS).toBeCloseTo(1.05, 2);
    expect(second).toMatchObject({ kind: 'send', to: ['b'], startS: first.doneS });
    expect(second.doneS).toBe(2 * first.doneS);
    expect(second.doneS).toBeCloseTo(2.1, 1);
    // One charge for both receivers: c's 4 Mbit/s downlink makes it the slowest.
    expect(broadcast.kind).toBe('broadcast');
    expect(broadcast.to).toEqual(['b', 'c']);
    expect(broadcast.startS).toBe(second.doneS);
    expect(broadcast.arrivalS[1] - broadcast.startS).toBeCloseTo((broadcast.wireBytes * 8) / 4e6, 9);
    expect(broadcast.doneS).toBe(broadcast.arrivalS[1]);
    expect(a.messages).toBe(3);
    expect(a.uplinkFreeAtS).toBeCloseTo(broadcast.startS + (broadcast.wireBytes * 8) / 8e6, 9);
    expect(a.predictedS).toBe(broadcast.doneS);
    // Receivers sent nothing.
    expect(b.messages).toBe(0);
    expect(c.messages).toBe(0);
  });

  it('account mode charges compressed tensors by their compressed size, a chunked message as one transfer', async () => {
    const config = loadClusterConfig({
      cluster: {
        collective: { tensor_compression: { codec: 'lz4', excluded_dtypes: [] } },
        net_emulation: { mode: 'account', groups: { all: link(['actor', 'rollout'], 8) } },
      },
    });
    const [actor]: Result[] = await fixture.run('one-way', workers(['actor', 'rollout'], config), {
      bytes: 3 * MiB + 1,
    });
    // The warm-up message, then the tensor: its header and four chunks charged as they were ready.
    expect(actor.report.messages).toBe(2);
    const sent = actor.report.transfers.at(-1);
    expect(sent.wireBytes).toBeLessThan((3 * MiB) / 100); // zeros
    expect(sent.wireBytes).toBeGreaterThan(4 * 4); // every chunk took some bytes
    expect(sent.doneS - sent.startS).toBeCloseTo((sent.wireBytes * 8) / 8e6, 9);
  });

  it('real mode: a send really waits for its link (80 Mbit/s, 1 MiB ≈ 0.105 s)', async () => {
    const config = net('real', { all: link(['actor', 'rollout'], 80) });
    const [actor, rollout]: Result[] = await fixture.run('one-way', workers(['actor', 'rollout'], config));
    // The send waits for its link, and the message reaches the rollout no sooner than the link allows
    // after it was sent (timed from the actor's start: the rollout may start its clock later).
    expect(actor.seconds).toBeGreaterThan(0.1);
    expect((rollout.endedAt - actor.startedAt) / 1000).toBeGreaterThan(0.1);
    for (const r of [actor, rollout]) expect(r.seconds).toBeLessThan(10);
    expect(actor.report.mode).toBe('real');
  });

  it('a worker left out of every group fails group creation instead of sending undelayed', async () => {
    const config = net('account', { only: link(['actor'], 8) });
    await expect(fixture.run('one-way', workers(['actor', 'rollout'], config))).rejects.toThrow(
      /worker "actor": net_emulation: worker\(s\) rollout are in no group/,
    );
  });
});
