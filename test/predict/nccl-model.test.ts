/**
 * NCCL's model (2.23.4) against values computed by hand from the constants of src/predict/nccl-tuning.ts
 * (tuning.cc's tables) and the graphs NCCL's search gives each machine; the arithmetic is in the comments.
 */
import { describe, expect, it } from 'vitest';
import { predictCollective, type TopologyInput } from '../../src/index.ts';
import { type NcclSystem, searchGraphs } from '../../src/predict/nccl-graph.ts';
import { log2i } from '../../src/predict/nccl-tuning.ts';

const KiB = 2 ** 10;
const MiB = 2 ** 20;
const GiB = 2 ** 30;

const dgxH100: NcclSystem = {
  computeCapability: 90,
  localGpus: 8,
  nodes: 1,
  gpuBw: 18 * 20.6,
  nvlink: true,
  nics: 0,
  nicBw: 50,
  pcieBw: 48,
  nvls: true,
};

describe('the graphs of NCCL search', () => {
  it('8 H100 on NVSwitch: ring 6 x 60 doubled to 12 x 30; NVLS 8 channels of 40', () => {
    // Ring: 370.8/60 = 6 channels (360); 50, 40, 30 give 350, 360, 360, none better; 24/60 < .49 stops.
    // 60 >= 25 and not (Hopper, < 50, > 4 channels): doubled to 12 x 30; 12 x 40 > 370.8 cannot go faster.
    // Tree: 12 channels; 40 x 12 > 370.8 * 8/7, so 30: 12 x 30 fits.
    // NVLS: 8 channels, each GPU carries 9 x speed (its own head twice): 9 x 50 > 370.8, 9 x 40 fits.
    expect(searchGraphs(dgxH100)).toEqual({
      ring: { nChannels: 12, bwIntra: 30, bwInter: 30 },
      tree: { nChannels: 12, bwIntra: 30, bwInter: 30 },
      nvls: { nChannels: 8, bwIntra: 40, bwInter: 60 },
    });
  });

  it('8 A100 on NVSwitch: ring 6 x 40 (all 240 GB/s) doubled to 12 x 20; no NVLS before Hopper', () => {
    const graphs = searchGraphs({ ...dgxH100, computeCapability: 80, gpuBw: 12 * 20, nvls: false });
    expect(graphs.ring).toEqual({ nChannels: 12, bwIntra: 20, bwInter: 20 });
    expect(graphs.nvls).toBeUndefined();
  });

  it('nodes of 8 H100 with 8 NDR NICs: 8 channels of 48 (PCIe Gen5 caps the NIC path)', () => {
    // Inter speeds from 48 (= min(NIC 50, PCIe 48)); one channel a NIC; NVLink carries 8 x 48 x 7/8 = 336.
    // 8 x 48 = 384 >= 370.8 ends the search; 48 < 50 with 8 channels on Hopper: not doubled.
    // NVLS: 48 -> 6 channels, 45 -> 7, 40 -> 8 (9 x 40 <= 370.8); then bwInter rises to 48.
    const graphs = searchGraphs({ ...dgxH100, nodes: 2, nics: 8 });
    expect(graphs.ring).toEqual({ nChannels: 8, bwIntra: 48, bwInter: 48 });
    expect(graphs.tree).toEqual({ nChannels: 8, bwIntra: 48, bwInter: 48 });
    expect(graphs.nvls).toEqual({ nChannels: 8, bwIntra: 40, bwInter: 48 });
  });

  it('NVLS needs more than 2 GPUs (ncclNvlsInit)', () => {
    expect(searchGraphs({ ...dgxH100, localGpus: 2 }).nvls).toBeUndefined();
  });

  it("log2i is NCCL's: floor(log2 n), -1 for 0", () => {
    expect([0, 1, 2, 3, 4, 16384, 2 ** 24 + 1].map(log2i)).toEqual([-1, 0, 1, 1, 2, 14, 24]);
  });
});

const h100 = (
  op: 'allReduce' | 'allGather' | 'broadcast',
  bytes: number,
  topology: TopologyInput = 'h100-nvlink',
) => predictCollective({ op, bytes, ranks: 8, topology });

describe('NCCL collective times, by hand', () => {
  it('8 x H100, allReduce 1 MiB: ring LL', () => {
    // LL bandwidth: min(llMaxBw[Hopper][1 node] 141, 12 x 30 x .5 = 180) = 141; to algbw x 8/14 = 80.571
    // latency: baseLat ring LL 6.6 + 14 steps x hwLat NVLink ring LL 0.6 = 15.0
    // 15.0 + 1048576 / (1000 x 80.571) = 15.0 + 13.0142
    const p = h100('allReduce', MiB);
    expect(p).toMatchObject({ algorithm: 'ring', protocol: 'LL' });
    expect(p.us).toBeCloseTo(15.0 + MiB / ((1000 * 141 * 8) / 14), 6);
  });

  it('8 x H100, allReduce 1 GiB: NVLS', () => {
    // NVLS: min(bwIntra 40, bwInter 60) x 8 channels = 320, x 5/6 = 266.67; latency hwLat NVLink NVLS 25
    // 25 + 2^30 / 266666.7 = 25 + 4026.53
    const p = h100('allReduce', GiB);
    expect(p).toMatchObject({ algorithm: 'nvls', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(25 + GiB / ((1000 * 320 * 5) / 6), 6);
    // nccl-tests' busbw: algbw x 2 x 7/8
    expect(p.busbwGBps).toBeCloseTo((GiB / p.us / 1000) * 1.75, 9);
  });

  it('8 x H100 without NVLS, allReduce 1 GiB: ring Simple', () => {
    // 12 x 30 = 360 x 8/14 = 205.71; latency 8.4 + 14 x 3.4 = 56.0
    const p = h100('allReduce', GiB, { preset: 'h100-nvlink', nvls: false });
    expect(p).toMatchObject({ algorithm: 'ring', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(56 + GiB / ((1000 * 360 * 8) / 14), 6);
  });

  it('8 x A100, allReduce 4 MiB: ring LL128', () => {
    // LL128: min(240 x .92 = 220.8, 12 channels x 20 = 240) = 220.8, x 8/14; latency 14 + 14 x 1.9 = 40.6
    // (LL: 15.0 + 4 MiB/(87.7 x 8/14) = 98.7; Simple: 56 + 4 MiB/(240 x 8/14) = 86.6)
    const p = h100('allReduce', 4 * MiB, 'a100-nvlink');
    expect(p).toMatchObject({ algorithm: 'ring', protocol: 'LL128' });
    expect(p.us).toBeCloseTo(40.6 + (4 * MiB) / ((1000 * 220.8 * 8) / 14), 6);
  });

  it('8 x H100, broadcast 1 GiB: ring Simple, one hop of latency', () => {
    // broadcast: nsteps = n, algbw = busbw x n/n = 360; latency 8.4 + 3.4 (sameChannels)
    const p = h100('broadcast', GiB);
    expect(p).toMatchObject({ algorithm: 'ring', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(11.8 + GiB / 360_000, 6);
    expect(p.busbwGBps).toBeCloseTo(GiB / p.us / 1000, 9);
  });

  it('2 x 8 H100 over NDR, allGather 4 GiB: ring Simple over the NICs', () => {
    // 8 x 48 = 384, x 16/15 = 409.6; latency 8.4 + 14 intra steps x max(3.4, net overhead 1 x 3)
    // + 1 inter step x hwLat net ring Simple 14 = 70.0
    const p = predictCollective({ op: 'allGather', bytes: 4 * GiB, ranks: 16, topology: 'h100-ib' });
    expect(p).toMatchObject({ algorithm: 'ring', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(70 + (4 * GiB) / 409_600, 6);
  });

  it('4 x 8 H100 over NDR, allReduce 1 MiB: tree LL128', () => {
    // bw: 8 x bwInter 48 = 384; tree allReduce min(384 x .92, 8 x perChMaxTreeBw[Hopper][4+ nodes] 36) = 288
    // LL128: min(288 x 120/128 = 270, 8 x perChMaxTreeLL128Bw 29.0 = 232) = 232; x .5 = 116
    // treeCorrectionFactor[LL128][log2i(1 MiB / 64) = 14] = .6: 69.6
    // latency 14 + 2 x ((32/4 - 1) x 1.25 + log2i(4) x hwLat net tree LL128 8.5) = 65.5
    const p = predictCollective({
      op: 'allReduce',
      bytes: MiB,
      ranks: 32,
      topology: { preset: 'h100-ib', nodes: 4 },
    });
    expect(p).toMatchObject({ algorithm: 'tree', protocol: 'LL128' });
    expect(p.us).toBeCloseTo(65.5 + MiB / 69_600, 6);
  });

  it('one H100 on each of 4 nodes, allGather 1 MiB: PAT', () => {
    // One GPU a node: 1 NIC, 1 channel of 48, doubled to 2 x 24; PAT: 48 x .85 = 40.8, no algbw conversion
    // latency 8 + log2i(4) x (14 / 3.5) + 4 x 2.8 = 27.2 (ring LL128 would take 57.3, ring LL 60.2)
    const p = predictCollective({
      op: 'allGather',
      bytes: MiB,
      ranks: [0, 8, 16, 24],
      topology: { preset: 'h100-ib', nodes: 4 },
    });
    expect(p).toMatchObject({ algorithm: 'pat', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(27.2 + MiB / 40_800, 6);
  });

  it('4 A100 on PCIe Gen4: 2 channels of 12, PCI latencies, no LL128', () => {
    // Speeds up to the 24 GB/s link: 20 -> 1 channel, 18, 15 -> 1, 12 -> 2 (24, all of it); 12 < 25: not doubled.
    // Simple: 2 x 12 = 24 x 4/6 = 16; latency 8.4 + 6 x hwLat PCI ring Simple 5.7 = 42.6
    const pcie = {
      name: 'pcie box',
      nodes: 1,
      gpusPerNode: 4,
      computeCapability: 80,
      intraNode: { kind: 'pcie', bandwidthGBps: 24 },
    } as const;
    const p = predictCollective({ op: 'allReduce', bytes: GiB, ranks: 4, topology: pcie });
    expect(p).toMatchObject({ algorithm: 'ring', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(42.6 + GiB / 16_000, 6);
    const protocols = [KiB, MiB, 4 * MiB, 64 * MiB].map(
      (bytes) => predictCollective({ op: 'allReduce', bytes, ranks: 4, topology: pcie }).protocol,
    );
    expect(protocols).not.toContain('LL128');
  });

  it('2 x 8 H100, allReduce 1 GiB: NVLS tree (NVLS inside the nodes, a tree between)', () => {
    // min(bwIntra 40, bwInter 48 (2 nodes)) x 8 = 320, x 5/6; latency 25 + 2 x log2i(2) x 14 = 53
    const p = predictCollective({ op: 'allReduce', bytes: GiB, ranks: 16, topology: 'h100-ib' });
    expect(p).toMatchObject({ algorithm: 'nvls-tree', protocol: 'Simple' });
    expect(p.us).toBeCloseTo(53 + GiB / ((1000 * 320 * 5) / 6), 6);
  });
});

describe('which algorithm NCCL runs', () => {
  it('small allReduce on one node: LL; from 2 MiB, NVLS on H100 (as nccl-tests#309 reports)', () => {
    expect(h100('allReduce', 8 * KiB)).toMatchObject({ algorithm: 'ring', protocol: 'LL' });
    expect(h100('allReduce', MiB)).toMatchObject({ algorithm: 'ring', protocol: 'LL' });
    expect(h100('allReduce', 2 * MiB)).toMatchObject({ algorithm: 'nvls', protocol: 'Simple' });
    expect(h100('allReduce', 16 * GiB)).toMatchObject({ algorithm: 'nvls', protocol: 'Simple' });
  });

  it('1 GiB allReduce: NVLS on H100 with NVLS on, ring otherwise; ring on A100', () => {
    expect(h100('allReduce', GiB).algorithm).toBe('nvls');
    expect(h100('allReduce', GiB, { preset: 'h100-nvlink', nvls: false }).algorithm).toBe('ring');
    expect(h100('allReduce', GiB, 'a100-nvlink').algorithm).toBe('ring');
  });

  it('allGather stays on the ring at 1 GiB: NVLS sends the whole buffer one way (320 < 411 GB/s algbw)', () => {
    expect(h100('allGather', GiB)).toMatchObject({ algorithm: 'ring', protocol: 'Simple' });
  });

  it('NVLS only from 3 GPUs, and it wins over the ring only from 6 (as NCCL 2.29 picks on H100)', () => {
    const allReduce = (ranks: number) =>
      predictCollective({ op: 'allReduce', bytes: GiB, ranks, topology: 'h100-nvlink' }).algorithm;
    expect([2, 4, 6, 8].map(allReduce)).toEqual(['ring', 'ring', 'nvls', 'nvls']);
  });

  it('a group inside one node of a multi-node topology takes the one-node model', () => {
    const p = predictCollective({
      op: 'allReduce',
      bytes: GiB,
      ranks: [8, 9, 10, 11, 12, 13, 14, 15],
      topology: 'h100-ib',
    });
    expect(p.us).toBeCloseTo(h100('allReduce', GiB).us, 9);
  });
});
