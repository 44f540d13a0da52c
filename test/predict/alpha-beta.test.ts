/** The alpha-beta model's closed forms, exactly, and predictCollective routing a group to it. */
import { describe, expect, it } from 'vitest';
import { predictCollective, type TopologySpec } from '../../src/index.ts';
import { alphaBetaTime, slowestLink } from '../../src/predict/alpha-beta.ts';

// alpha 10 us, B 1.25 GB/s (10 Gb/s Ethernet): a byte costs 1/1250 us.
const link = { alphaUs: 10, bandwidthGBps: 1.25 };
const S = 1_000_000; // S/B = 800 us

describe('alphaBetaTime', () => {
  it('ring allReduce: 2(n-1) alpha + 2(n-1)/n S/B', () => {
    // n = 4: 2*3*10 + 2*3/4*800 = 60 + 1200
    expect(alphaBetaTime('allReduce', 4, S, link)).toEqual({ us: 1260, schedule: 'ring' });
  });

  it('ring allGather and reduceScatter: (n-1) alpha + (n-1)/n S/B', () => {
    // n = 8: 7*10 + 7/8*800 = 70 + 700
    expect(alphaBetaTime('allGather', 8, S, link)).toEqual({ us: 770, schedule: 'ring' });
    expect(alphaBetaTime('reduceScatter', 8, S, link)).toEqual({ us: 770, schedule: 'ring' });
  });

  it('binomial-tree broadcast and reduce: ceil(log2 n) (alpha + S/B)', () => {
    // n = 5: ceil(log2 5) = 3; 3*(10 + 800)
    expect(alphaBetaTime('broadcast', 5, S, link)).toEqual({ us: 2430, schedule: 'binomial-tree' });
    expect(alphaBetaTime('reduce', 4, S, link)).toEqual({ us: 1620, schedule: 'binomial-tree' });
  });

  it('pairwise allToAll and linear gather/scatter: (n-1) alpha + (n-1)/n S/B', () => {
    // n = 4: 3*10 + 3/4*800
    expect(alphaBetaTime('allToAll', 4, S, link)).toEqual({ us: 630, schedule: 'pairwise' });
    expect(alphaBetaTime('gather', 4, S, link)).toEqual({ us: 630, schedule: 'linear' });
    expect(alphaBetaTime('scatter', 4, S, link)).toEqual({ us: 630, schedule: 'linear' });
  });

  it('send: alpha + S/B', () => {
    expect(alphaBetaTime('send', 2, S, link)).toEqual({ us: 810, schedule: 'direct' });
  });

  it('one rank costs nothing', () => {
    expect(alphaBetaTime('allReduce', 1, S, link).us).toBe(0);
    expect(alphaBetaTime('broadcast', 1, S, link).us).toBe(0);
  });

  it('a path crossing several links takes the largest alpha and the smallest bandwidth', () => {
    expect(slowestLink([link, { alphaUs: 2, bandwidthGBps: 300 }])).toEqual({
      alphaUs: 10,
      bandwidthGBps: 1.25,
    });
  });
});

/** Four CPU ranks of one machine, as calibration would measure them. */
const machine: TopologySpec = {
  name: 'this machine',
  nodes: 1,
  gpusPerNode: 4,
  intraNode: { kind: 'alpha-beta', bandwidthGBps: 10, latencyUs: 5 },
  launchOverheadUs: 2,
};

describe('predictCollective on alpha-beta links', () => {
  it('prices a group on an alpha-beta link with the closed form, plus the launch overhead', () => {
    // 2*3*5 + 2*3/4 * 1e6/1e4 = 30 + 150, + 2 launch
    const p = predictCollective({ op: 'allReduce', bytes: S, ranks: 4, topology: machine });
    expect(p).toMatchObject({ algorithm: 'alpha-beta', protocol: 'ring' });
    expect(p.us).toBeCloseTo(182, 9);
    // busbw = algbw * 2(n-1)/n = (1e6 / 182 / 1e3) * 1.5
    expect(p.busbwGBps).toBeCloseTo((S / 182 / 1000) * 1.5, 9);
  });

  it('uses the slowest link a group crosses: NVLink inside nodes, Ethernet between', () => {
    const cluster: TopologySpec = {
      name: 'gpus over tcp',
      nodes: 2,
      gpusPerNode: 2,
      intraNode: { kind: 'nvlink', bandwidthGBps: 370.8 },
      interNode: { kind: 'ethernet', bandwidthGBps: 12.5, latencyUs: 20, nics: 2 },
    };
    // Across both nodes (2 ranks on each): alpha max(0, 20) = 20, B min(370.8, 12.5*2) = 25.
    // allGather, n = 4: 3*20 + 3/4 * 1e6/25e3 = 60 + 30
    const across = predictCollective({ op: 'allGather', bytes: S, ranks: 4, topology: cluster });
    expect(across).toMatchObject({ algorithm: 'alpha-beta', protocol: 'ring' });
    expect(across.us).toBeCloseTo(90, 9);
    // One rank on each node: only the Ethernet link. send: 20 + 1e6/25e3
    const send = predictCollective({ op: 'send', bytes: S, ranks: [0, 2], topology: cluster });
    expect(send).toMatchObject({ algorithm: 'alpha-beta', protocol: 'direct' });
    expect(send.us).toBeCloseTo(60, 9);
    // Inside a node the group is NCCL's again.
    expect(predictCollective({ op: 'allGather', bytes: S, ranks: [0, 1], topology: cluster }).algorithm).toBe(
      'ring',
    );
  });

  it('monitoredBarrier: rank 0 answers each rank in turn, 8 bytes each way', () => {
    // 2*(n-1)*(alpha + 8/B) = 6 * (5 + 8/1e4), + 2 launch
    const p = predictCollective({ op: 'monitoredBarrier', bytes: 0, ranks: 4, topology: machine });
    expect(p.us).toBeCloseTo(6 * (5 + 8 / 10_000) + 2, 9);
  });
});
