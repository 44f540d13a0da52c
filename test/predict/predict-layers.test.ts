/**
 * Predict mode above ThreadGroup and on the less common calls: p2p messages,
 * WeightSyncEngine, DTensor, object collectives, recvFromAny,
 * batchIsendIrecv, allToAll / gather / scatter, subgroups, and network
 * emulation on the same clock. Results stay exact (the same as without
 * predict), the report is the same whatever the real run's timing, and each
 * layer's calls move the rank's clock only where the program waits on them.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serialize } from 'node:v8';
import { afterAll, describe, expect, it } from 'vitest';
import {
  loadClusterConfig,
  loadTopology,
  type PredictedCall,
  type PredictReport,
  predictCollective,
  spawnThreads,
} from '../../src/index.ts';
import type { scenarios } from '../fixtures/predict-layers.ts';
import { scenarioFixture } from '../fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(new URL('../fixtures/predict-layers.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tensorcomm-predict-layers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const topology = loadTopology('h100-nvlink');
const names = ['actor', 'rollout', 'learner', 'critic'];
let files = 0;

/** A thread job of four named ranks, predicting on h100-nvlink unless `predict` is false. */
function job(options: { predict?: boolean; extra?: object } = {}) {
  const report = join(dir, `report-${files++}.json`);
  const predict = options.predict === false ? undefined : { topology: 'h100-nvlink', report };
  return {
    report: () => JSON.parse(readFileSync(report, 'utf8')) as PredictReport,
    launch: (entry: URL, args: object) =>
      spawnThreads(entry, { worldSize: 4, names, args, predict, ...options.extra }),
  };
}

async function predicted<K extends keyof typeof scenarios>(
  scenario: K,
  args: object = {},
  extra: object = {},
) {
  const j = job({ extra });
  const ranks = await fixture.run(scenario, j.launch, args);
  return { ranks, report: j.report() };
}

const transferUs = (bytes: number) => predictCollective({ op: 'send', bytes, ranks: [0, 1], topology }).us;
const latestEnd = (calls: PredictedCall[]) => Math.max(...calls.map((c) => c.endUs));

/** Every scenario whose prediction must not depend on the real run's timing, in one job. */
const STEPS = [
  'messages',
  'messageInFlight',
  'weightSync',
  { scenario: 'weightSync', args: { lend: false }, key: 'weightSyncPacked' },
  'dtensor',
  'objects',
  'batch',
  'rooted',
  'subgroups',
] as const;

describe('predict mode above ThreadGroup', () => {
  it('gives exact results, and the same report under chaos delays, for every layer and call', async () => {
    const plain = await fixture.runSteps(STEPS, job({ predict: false }).launch);
    const calmJob = job();
    const calm = await fixture.runSteps(STEPS, calmJob.launch);
    const shakenJob = job({ extra: { chaos: { seed: 11, maxDelayMs: 4 } } });
    const shaken = await fixture.runSteps(STEPS, shakenJob.launch);
    for (const key of Object.keys(calm) as Array<keyof typeof calm>) {
      expect(calm[key].map((r) => r.values)).toEqual(plain[key].map((r) => r.values));
      expect(plain[key].every((r) => r.now === undefined)).toBe(true);
    }
    expect(shaken).toEqual(calm);
    expect(shakenJob.report()).toEqual(calmJob.report());
  });

  it('p2p messages: each part is a send on the workers’ group, the receiver waits for the sender', async () => {
    const { ranks, report } = await predicted('messages');
    expect(ranks[1].values).toEqual([
      [1, 3, 1024],
      [2, 4, 1024],
    ]);
    const sends = report.calls.filter((c) => c.rank === 0);
    const recvs = report.calls.filter((c) => c.rank === 1);
    // A header and a tensor per message, all issued as the actor's compute ended.
    expect(sends.map((c) => c.op)).toEqual(['send', 'send', 'send', 'send']);
    expect(recvs.map((c) => c.op).sort()).toEqual(['recv', 'recv', 'recvObject', 'recvObject']);
    for (const c of sends) {
      expect(c).toMatchObject({ group: 'ranks 0, 1', peer: 1, startUs: 200 });
      expect(c.endUs - c.startUs).toBeCloseTo(transferUs(c.bytes), 9);
    }
    expect(sends.filter((c) => c.bytes === 4096)).toHaveLength(2);
    for (const r of ranks.slice(0, 2)) expect(r.now).toBeCloseTo(latestEnd(sends), 9);
    expect(report.ranks[1]).toMatchObject({ computeUs: 0, waitUs: 200 });
  });

  it('a message in flight moves the clock only where the program waits on it', async () => {
    const elements = 4 * 2 ** 20;
    const { ranks, report } = await predicted('messageInFlight', { elements });
    expect(ranks[1].values).toEqual([5]);
    const messageUs = transferUs(elements * 4);
    const allReduce = report.calls.find((c) => c.op === 'allReduce')!;
    expect(allReduce.startUs).toBe(0);
    // The message outlasts the allReduce and the compute after it: the last wait ends with it.
    expect(messageUs).toBeGreaterThan(allReduce.endUs + 50);
    for (const r of ranks.slice(0, 2)) expect(r.now).toBeCloseTo(messageUs, 6);
    for (const r of report.ranks.slice(0, 2)) {
      expect(r.computeUs).toBe(50);
      expect(r.exposedCommUs).toBeCloseTo(messageUs - 50, 6);
    }
  });

  it('WeightSyncEngine: the senders’ buckets on the world group, the sync awaited where the program waits', async () => {
    const { ranks, report } = await predicted('weightSync');
    const want = Array.from({ length: 12 }, (_, i) => [`w${i}`, i + 1, 128 + 32 * i]);
    expect(ranks[2].values).toEqual(want);
    expect(ranks[3].values).toEqual(want);
    const byRank = (r: number) => report.calls.filter((c) => c.rank === r);
    // Each sender's first bucket goes as its compute ends; the rest of the sync overlaps its next 10 µs.
    for (const sender of [0, 1]) {
      const first = Math.min(...byRank(sender).map((c) => c.startUs));
      expect(first).toBe(100 * (sender + 1));
      expect(ranks[sender].now).toBeCloseTo(Math.max(first + 10, latestEnd(byRank(sender))), 9);
    }
    // A sync's gaps (between its calls, waiting for its peers) are waiting, not exposed communication.
    for (const r of report.ranks) {
      expect(r.exposedCommUs).toBeLessThanOrEqual(r.commUs);
      expect(r.computeUs + r.exposedCommUs + r.waitUs).toBeCloseTo(r.endUs, 9);
    }
    expect(report.ranks[0].waitUs).toBeGreaterThan(0);
    for (const receiver of [2, 3]) {
      expect(report.ranks[receiver].computeUs).toBe(60);
      expect(byRank(receiver).every((c) => c.group === 'world')).toBe(true);
      expect(ranks[receiver].now).toBeGreaterThanOrEqual(200);
    }
  });

  it('DTensor: each redistribute step starts as the one before it ended; compute overlaps a pending full()', async () => {
    const { ranks, report } = await predicted('dtensor');
    expect((ranks[0].values as unknown[])[1]).toEqual(Array.from({ length: 16 }, (_, i) => i));
    const byRank = (r: number) => report.calls.filter((c) => c.rank === r);
    for (const r of [0, 1, 2, 3]) {
      const calls = byRank(r);
      expect(calls.map((c) => c.op)).toEqual([
        'broadcast',
        'allGather',
        'allGather',
        'reduceScatter',
        'allReduce',
        'allToAll',
      ]);
      // full()'s second step (the other mesh dim) starts when its first ended, whatever the compute.
      expect(calls[2].startUs).toBeGreaterThanOrEqual(calls[1].endUs);
      expect(ranks[r].now).toBeCloseTo(latestEnd(report.calls), 9);
    }
    // full() was issued at 50 r µs after the broadcast and awaited 10 µs later: rank 0's first step
    // (mesh dim 0, with rank 2) starts when rank 2 issued it.
    expect(byRank(0)[1].startUs).toBeCloseTo(byRank(0)[0].endUs + 100, 9);
  });

  it('object collectives are predicted by their serialized bytes, as torch moves them', async () => {
    const { ranks, report } = await predicted('objects');
    expect(ranks.map((r) => r.values)).toEqual([
      ['world', [0, 1, 2, 3], null, 'a', null],
      ['world', [0, 1, 2, 3], [0, 2, 4, 6], 'bb', null],
      ['world', [0, 1, 2, 3], null, 'ccc', null],
      ['world', [0, 1, 2, 3], null, 'dddd', 4000],
    ]);
    const big = { rank: 0, text: 'x'.repeat(4000) };
    const size = (v: unknown) => serialize(v).length;
    const bytes = {
      broadcastObject: size({ hello: 'world', big }),
      allGatherObject: 4 * size({ rank: 3, pad: 'y'.repeat(300) }),
      gatherObject: 4 * size(6),
      scatterObject: 4 * size('dddd'),
    };
    for (const [op, b] of Object.entries(bytes)) {
      const calls = report.calls.filter((c) => c.op === op);
      expect(calls).toHaveLength(4);
      for (const c of calls) {
        expect(c.bytes).toBe(b);
        expect(c.endUs - c.startUs).toBeCloseTo(
          predictCollective({ op: op as 'gatherObject', bytes: b, ranks: 4, topology }).us,
          9,
        );
      }
    }
    expect(report.calls.find((c) => c.op === 'recvObject')).toMatchObject({
      rank: 3,
      peer: 0,
      bytes: size(big),
    });
  });

  it('recvFromAny: each message taken at the later of its post and its arrival', async () => {
    const { ranks, report } = await predicted('fromAny');
    expect(ranks[0].values).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    // Which message each call takes is the real run's race; the last one arrives at 300 µs plus its transfer.
    expect(ranks[0].now).toBeCloseTo(300 + transferUs(256), 9);
    const taken = report.calls.filter((c) => c.op === 'recvFromAny');
    expect(taken.map((c) => c.peer).sort()).toEqual([1, 2, 3]);
    for (const c of taken)
      expect(c.endUs).toBeCloseTo(Math.max(c.startUs, 100 * c.peer! + transferUs(256)), 9);
  });

  it('batchIsendIrecv: the ring is waited on only where the program waits, after its compute', async () => {
    const { ranks, report } = await predicted('batch');
    expect(ranks.map((r) => r.values)).toEqual([[3], [0], [1], [2]]);
    const barrier = report.calls.find((c) => c.op === 'barrier')!;
    expect(transferUs(65536)).toBeLessThan(barrier.endUs + 1000);
    for (const r of ranks) expect(r.now).toBeCloseTo(barrier.endUs + 1000, 9);
    for (const r of report.ranks) expect(r.exposedCommUs).toBeCloseTo(barrier.endUs, 9);
  });

  it('allToAll, gather and scatter: one after another, each for the time the model gives it', async () => {
    const { ranks, report } = await predicted('rooted');
    expect(ranks[0].values).toEqual([[0, 10, 20, 30], [0, 1, 2, 3], 100]);
    const expected = { allToAll: 4096, gather: 2048, scatter: 2048 };
    let start = 0;
    for (const [op, bytes] of Object.entries(expected)) {
      const us = predictCollective({ op: op as 'gather', bytes, ranks: 4, topology }).us;
      for (const c of report.calls.filter((x) => x.op === op)) {
        expect(c).toMatchObject({ bytes, startUs: start });
        expect(c.endUs).toBeCloseTo(start + us, 9);
      }
      start += us;
    }
  });

  it('subgroups from newGroup and splitGroup run as streams of their own', async () => {
    const { ranks, report } = await predicted('subgroups');
    expect(ranks.map((r) => r.values)).toEqual([
      [2, 2, 4],
      [2, 4, 4],
      [2, 2, 4],
      [2, 4, 4],
    ]);
    const call = (group: string) => report.calls.find((c) => c.group === group)!;
    expect(call('low').startUs).toBe(20);
    expect(call('high').startUs).toBe(60);
    expect(call('world').startUs).toBe(60);
    // Each split pair waits for its slower member's pair allReduce.
    expect(call('even').startUs).toBe(call('high').endUs);
    expect(call('odd').startUs).toBe(call('high').endUs);
  });
});

describe('network emulation in predict mode', () => {
  const config = loadClusterConfig({
    cluster: {
      net_emulation: {
        mode: 'real',
        groups: {
          trainers: { workers: ['actor'], uplink_mbps: 8, downlink_mbps: 8 },
          rollouts: { workers: ['rollout', 'learner', 'critic'], uplink_mbps: 8, downlink_mbps: 8 },
        },
        latency: [{ from: 'trainers', to: 'rollouts', one_way_ms: 5 }],
      },
    },
  });

  it('charges each message on the virtual clock, sleeps for nothing, and is the messages’ predicted time', async () => {
    const calm = await predicted('emulated', {}, { config });
    const shaken = await predicted('emulated', {}, { config, chaos: { seed: 3, maxDelayMs: 4 } });
    expect(shaken.report).toEqual(calm.report);
    const [actor, rollout] = calm.ranks as Array<Extract<(typeof calm.ranks)[number], { now: unknown }>>;
    expect(rollout.values).toEqual([1, 2]);
    const [first, second] = actor.network!.transfers;
    const wireS = (t: { wireBytes: number }) => (t.wireBytes * 8) / 8e6;
    // Charged at the actor's virtual time; the second queues behind the first on the uplink.
    expect(first.startS).toBeCloseTo(100e-6, 12);
    expect(first.doneS).toBeCloseTo(first.startS + wireS(first) + 0.005, 12);
    expect(second.startS).toBeCloseTo(first.startS + wireS(first), 12);
    expect(second.doneS).toBeCloseTo(second.startS + wireS(second) + 0.005, 12);
    // The clocks end at the second message's arrival: the link's time is the prediction.
    expect(actor.now).toBeCloseTo(second.doneS * 1e6, 6);
    expect(rollout.now).toBeCloseTo(second.doneS * 1e6, 6);
    const parts = calm.report.calls.filter((c) => c.rank === 0);
    expect(parts.every((c) => c.algorithm === 'netem')).toBe(true);
    // Two 1 MiB messages at 8 Mbit/s take 2.1 s of link time: none of it was slept.
    expect(actor.wallMs).toBeLessThan(1000);
    expect(rollout.wallMs).toBeLessThan(1000);
  });
});
