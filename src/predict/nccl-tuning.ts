/**
 * NCCL's tuning constants, pinned to one release: NCCL 2.23.4 (tag v2.23.4-1 of NVIDIA/nccl). Each
 * table names the file and the table or expression it comes from, so a later release can be
 * checked against it line by line. Latencies are microseconds, bandwidths GB/s (1e9 bytes/s), as
 * in NCCL. Only what the model uses is here: CollNet (SHARP in the network) is not modelled.
 */

export const NCCL_VERSION = '2.23.4';

/** NCCL's algorithms in its own order (src/include/nccl_common.h): ties go to the first, as in NCCL. */
export type NcclAlgorithm = 'tree' | 'ring' | 'nvls' | 'nvls-tree' | 'pat';
export const NCCL_ALGORITHMS: readonly NcclAlgorithm[] = ['tree', 'ring', 'nvls', 'nvls-tree', 'pat'];

/** NCCL's protocols in its own order (NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE). */
export type NcclProtocol = 'LL' | 'LL128' | 'Simple';
export const NCCL_PROTOCOLS: readonly NcclProtocol[] = ['LL', 'LL128', 'Simple'];

type PerProtocol = Readonly<Record<NcclProtocol, number>>;
type PerAlgorithm = Readonly<Record<NcclAlgorithm, PerProtocol>>;

/** src/graph/tuning.cc `baseLat` (rows Tree, Ring, NVLS, NVLSTree; PAT has no row: 0). */
export const BASE_LATENCY_US: PerAlgorithm = {
  tree: { LL: 6.8, LL128: 14.0, Simple: 8.4 },
  ring: { LL: 6.6, LL128: 14.0, Simple: 8.4 },
  nvls: { LL: 0, LL128: 0, Simple: 0 },
  'nvls-tree': { LL: 0, LL128: 0, Simple: 0 },
  pat: { LL: 0, LL128: 0, Simple: 0 },
};

/** The link class of tuning.cc's `NCCL_HW_NVLINK`, `NCCL_HW_PCI`, `NCCL_HW_NET`. */
export type HardwareClass = 'nvlink' | 'pci' | 'net';

/** src/graph/tuning.cc `hwLat[NCCL_HW_*][algorithm][protocol]`: the latency of one step over a link. */
export const HW_LATENCY_US: Readonly<Record<HardwareClass, PerAlgorithm>> = {
  nvlink: {
    tree: { LL: 0.6, LL128: 1.25, Simple: 4.0 },
    ring: { LL: 0.6, LL128: 1.9, Simple: 3.4 },
    nvls: { LL: 0, LL128: 0, Simple: 25 },
    'nvls-tree': { LL: 0, LL128: 0, Simple: 25 },
    pat: { LL: 0, LL128: 0, Simple: 0 },
  },
  pci: {
    tree: { LL: 1.0, LL128: 1.9, Simple: 4.0 },
    ring: { LL: 1.0, LL128: 2.5, Simple: 5.7 },
    nvls: { LL: 0, LL128: 0, Simple: 0 },
    'nvls-tree': { LL: 0, LL128: 0, Simple: 0 },
    pat: { LL: 0, LL128: 0, Simple: 0 },
  },
  net: {
    tree: { LL: 5.0, LL128: 8.5, Simple: 14 },
    ring: { LL: 2.7, LL128: 4.0, Simple: 14.0 },
    nvls: { LL: 0, LL128: 0, Simple: 18 },
    'nvls-tree': { LL: 0, LL128: 0, Simple: 14 },
    pat: { LL: 0, LL128: 0, Simple: 0 },
  },
};

/** tuning.cc `VOLTA_COMPCAP_IDX` / `AMPERE_COMPCAP_IDX` / `HOPPER_COMPCAP_IDX` from the lowest compute capability. */
export function compCapIndex(computeCapability: number): 0 | 1 | 2 {
  return computeCapability >= 90 ? 2 : computeCapability >= 80 ? 1 : 0;
}

/**
 * tuning.cc `llMaxBws[index1][index2]`: the LL protocol's bandwidth cap. index1 is the GPU generation
 * on one node, the CPU vendor across nodes (row 0: Intel, row 1: AMD); index2 is min(nNodes, 3) - 1.
 */
export const LL_MAX_BW: readonly (readonly number[])[] = [
  [39.0, 39.0, 20.4],
  [87.7, 22.5, 19.0],
  [141.0, 45.0, 35.0],
];

/** tuning.cc `perChMaxRingLL128Bws[compCapIndex][index2]`: LL128 ring bandwidth per channel. */
export const PER_CHANNEL_MAX_RING_LL128_BW: readonly (readonly number[])[] = [
  [20.0, 20.0, 20.0],
  [20.0, 20.0, 20.0],
  [36.7, 36.7, 36.7],
];

/** tuning.cc `perChMaxTreeLL128Bws[compCapIndex][index2]`: LL128 tree bandwidth per channel. */
export const PER_CHANNEL_MAX_TREE_LL128_BW: readonly (readonly number[])[] = [
  [20.0, 20.0, 20.0],
  [20.0, 20.0, 20.0],
  [36.7, 36.7, 29.0],
];

/** tuning.cc `perChMaxTreeBws[compCapIndex][index2]`: tree allReduce bandwidth per channel. */
export const PER_CHANNEL_MAX_TREE_BW: readonly (readonly number[])[] = [
  [26.5, 18.5, 10.0],
  [24.0, 23.6, 17.8],
  [38.7, 41.4, 36.0],
];

/** The "various model refinements" of ncclTopoTuneModel (tuning.cc), as multipliers of the bus bandwidth. */
export const REFINEMENT = {
  /** Ring LL: `busBw * .5`, then capped by llMaxBw. */
  ringLL: 0.5,
  /** Ring LL128: `busBw * 0.92` (120/128 rounded down by NCCL). */
  ringLL128: 0.92,
  /** Tree allReduce: `busBw * .92`, capped by perChMaxTreeBw per channel. */
  treeAllReduce: 0.92,
  /** Tree LL: `busBw * 1.0/3.8`, capped by llMaxBw. */
  treeLL: 1 / 3.8,
  /** Tree LL128 on one node: `7.0/9.0`. */
  treeLL128OneNode: 7 / 9,
  /** Tree LL128 across nodes: `120.0/128.0`. */
  treeLL128Nodes: 120 / 128,
  /** PAT: `busBw *= .85`. */
  pat: 0.85,
} as const;

/** tuning.cc "Convert bus BW to algorithm BW": NVLS and NVLS tree `5.0/6.0`, other non-ring algorithms `.5`. */
export const ALGBW_RATIO = { nvls: 5 / 6, tree: 0.5 } as const;

/**
 * tuning.cc `treeCorrectionFactor[protocol][log2i(nBytes >> 6)]` for tree allReduce, sizes 64 B to
 * 256 MiB in powers of two (23 entries); outside that range the factor is 1.
 */
export const TREE_CORRECTION: Readonly<Record<NcclProtocol, readonly number[]>> = {
  LL: [
    1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0,
    1.0, 1.0,
  ],
  LL128: [
    1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9,
    1.0, 1.0,
  ],
  Simple: [
    0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8,
    0.9, 0.9,
  ],
};

/** ncclTopoGetAlgoTime (tuning.cc): ring Simple allReduce across nodes multiplies its latency ("plateau effect of ring"). */
export function ringPlateauFactor(computeCapability: number): number {
  return computeCapability < 80 ? 1.9 : 1.4;
}

/**
 * tuning.cc `getNetOverhead`: the network post overhead of an inter-node ring step, 1 us on Intel x86
 * (the CPU of DGX H100/A100, assumed throughout), tripled for Simple.
 */
export const NET_OVERHEAD_US = 1.0;
export const NET_OVERHEAD_SIMPLE_FACTOR = 3;

/** tuning.cc PAT latency: `8 + log2i(nNodes) * (interLat/3.5) + nRanks * 2.8`. */
export const PAT_LATENCY = { baseUs: 8, interDivisor: 3.5, perRankUs: 2.8 } as const;

/**
 * src/graph/search.cc `speedArrayIntra`, `speedArrayInter`, `sm90SpeedArrayIntra`, `sm90SpeedArrayInter`:
 * the per-channel bandwidths the topology search tries, fastest first.
 */
export const SPEEDS = {
  intra: [40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0],
  inter: [
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12,
  ],
  sm90Intra: [60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0],
  sm90Inter: [
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12,
  ],
} as const;

/** src/include/device.h MAXCHANNELS; src/init.cc gives the ring graph `MAXCHANNELS/2` channels at most. */
export const MAX_RING_CHANNELS = 32 / 2;

/**
 * search.cc ncclTopoCompute: a slower speed is tried only while it is more than this fraction of the
 * best graph's (`speedArray[speedIndex+1]/graph->bwInter > .49`).
 */
export const SPEED_STEP_FLOOR = 0.49;

/**
 * search.cc ncclTopoDupChannels: channels are doubled (and their bandwidth halved) when the per-channel
 * bandwidth is at least 25, except after Ampere below 50 with more than 4 channels.
 */
export const DUP_CHANNELS = { minBw: 25.0, sm90MinBw: 50.0, sm90MaxChannels: 4 } as const;

/** src/graph/topo.h: NVLink bandwidth per link as NCCL counts it, by compute capability. */
export const NVLINK_BW_PER_LINK = { sm80: 20.0, sm90: 20.6 } as const;

/**
 * src/graph/topo.cc ncclTopoAddPci (`width*speed/80.0` with kvDictPciGen 240 for 32 GT/s, 120 for
 * 16 GT/s): the bandwidth NCCL gives an x16 PCIe link, the cap of the path between a GPU and its NIC.
 */
export const PCIE_X16_BW = { gen4: 24.0, gen5: 48.0 } as const;

/** src/enqueue.cc `NCCL_P2P_LL_THRESHOLD`: point-to-point transfers up to this many bytes use LL. */
export const P2P_LL_THRESHOLD_BYTES = 16384;

/** NCCL's log2i (src/include/utils.h, bitops.h log2Down): floor(log2(n)), -1 for 0. */
export function log2i(n: number): number {
  if (n < 1) return -1;
  let log = 0;
  for (let rest = Math.floor(n); rest >= 2; rest = Math.floor(rest / 2)) log++;
  return log;
}
