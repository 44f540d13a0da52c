/**
 * The alpha-beta model's closed forms, exactly, with and without its optional rates (duplex D,
 * reduction G), and predictCollective routing a group to it.
 */
import { describe, expect, it } from 'vitest';
import { predictCollective, type TopologySpec } from '../../src/index.ts';
import { alphaBetaTerms, alphaBetaTime, slowestLink } from '../../src/predict/alpha-beta.ts';

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

describe('alphaBetaTime with a duplex bandwidth D and a reduction rate G', () => {
  // D half of B (S/D = 1600 us), G 2.5 GB/s (S/G = 400 us).
  const cpu = { ...link, duplexGBps: 0.625, reduceGBps: 2.5 };

  it('ring allReduce: 2(n-1) alpha + 2(n-1)/n S/D + (n-1)/n S/G', () => {
    // n = 4: 60 + 1.5*1600 + 0.75*400
    expect(alphaBetaTime('allReduce', 4, S, cpu)).toEqual({ us: 2760, schedule: 'ring' });
  });

  it('ring allGather: (n-1) alpha + (n-1)/n S/D; reduceScatter adds (n-1)/n S/G', () => {
    // n = 8: 70 + 7/8*1600, + 7/8*400
    expect(alphaBetaTime('allGather', 8, S, cpu)).toEqual({ us: 1470, schedule: 'ring' });
    expect(alphaBetaTime('reduceScatter', 8, S, cpu)).toEqual({ us: 1820, schedule: 'ring' });
  });

  it('pairwise allToAll sends both ways at once: (n-1) alpha + (n-1)/n S/D', () => {
    expect(alphaBetaTime('allToAll', 4, S, cpu)).toEqual({ us: 1230, schedule: 'pairwise' });
  });

  it('a tree, a root and a send go one way at a time, at B; a tree reduce adds S/G a level', () => {
    expect(alphaBetaTime('broadcast', 5, S, cpu)).toEqual({ us: 2430, schedule: 'binomial-tree' });
    // n = 4: 2*(10 + 800 + 400)
    expect(alphaBetaTime('reduce', 4, S, cpu)).toEqual({ us: 2420, schedule: 'binomial-tree' });
    expect(alphaBetaTime('gather', 4, S, cpu)).toEqual({ us: 630, schedule: 'linear' });
    expect(alphaBetaTime('send', 2, S, cpu)).toEqual({ us: 810, schedule: 'direct' });
  });

  it('D = B and no G is the plain model', () => {
    for (const op of ['allReduce', 'allGather', 'reduceScatter', 'allToAll', 'reduce'] as const) {
      expect(alphaBetaTime(op, 4, S, { ...link, duplexGBps: link.bandwidthGBps })).toEqual(
        alphaBetaTime(op, 4, S, link),
      );
    }
  });

  it('the terms: messages, bytes one way, bytes each way at once, bytes reduced', () => {
    expect(alphaBetaTerms('reduceScatter', 4, 4000)).toEqual({
      schedule: 'ring',
      messages: 3,
      simplexBytes: 0,
      duplexBytes: 3000,
      reducedBytes: 3000,
    });
    expect(alphaBetaTerms('send', 2, 4000)).toMatchObject({
      messages: 1,
      simplexBytes: 4000,
      duplexBytes: 0,
    });
  });

  it('a path takes the smallest of each rate some link has; a link without D counts as D = B', () => {
    expect(slowestLink([link, { alphaUs: 2, bandwidthGBps: 300, duplexGBps: 100, reduceGBps: 5 }])).toEqual({
      alphaUs: 10,
      bandwidthGBps: 1.25,
      duplexGBps: 1.25,
      reduceGBps: 5,
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

  it('prices D and G from the links a group crosses; NICs stripe D as they stripe B, not G', () => {
    const cpus: TopologySpec = {
      name: 'two calibrated nodes',
      nodes: 2,
      gpusPerNode: 2,
      intraNode: { kind: 'alpha-beta', bandwidthGBps: 10, latencyUs: 5, duplexGBps: 4, reduceGBps: 8 },
      interNode: {
        kind: 'alpha-beta',
        bandwidthGBps: 2,
        latencyUs: 50,
        duplexGBps: 1,
        reduceGBps: 3,
        nics: 2,
      },
    };
    const S2 = 1_200_000;
    // Across the nodes: alpha 50, B min(10, 4) = 4, D min(4, 2) = 2, G min(8, 3) = 3.
    // allReduce, n = 4: 6*50 + 1.5 * 1.2e6/2e3 + 0.75 * 1.2e6/3e3 = 300 + 900 + 300
    expect(predictCollective({ op: 'allReduce', bytes: S2, ranks: 4, topology: cpus }).us).toBeCloseTo(
      1500,
      9,
    );
    // A send between the nodes goes one way over both NICs: 50 + 1.2e6/4e3.
    expect(predictCollective({ op: 'send', bytes: S2, ranks: [0, 2], topology: cpus }).us).toBeCloseTo(
      350,
      9,
    );
    // Inside node 0: allGather, n = 2: 5 + 0.5 * 1.2e6/4e3.
    expect(predictCollective({ op: 'allGather', bytes: S2, ranks: [0, 1], topology: cpus }).us).toBeCloseTo(
      155,
      9,
    );
  });

  it('monitoredBarrier: rank 0 answers each rank in turn, 8 bytes each way', () => {
    // 2*(n-1)*(alpha + 8/B) = 6 * (5 + 8/1e4), + 2 launch
    const p = predictCollective({ op: 'monitoredBarrier', bytes: 0, ranks: 4, topology: machine });
    expect(p.us).toBeCloseTo(6 * (5 + 8 / 10_000) + 2, 9);
  });
});
