/**
 * The channels NCCL's topology search (src/graph/search.cc ncclTopoCompute, NCCL 2.23.4) finds for a
 * communicator, reduced to the symmetric machines a topology describes: every GPU has the same NVLink
 * (or PCIe) bandwidth to a switch, and every node the same NICs. A graph is a number of channels and
 * the bandwidth each carries inside a node (bwIntra) and over the network (bwInter); the tuning model
 * turns it into the bus bandwidth of each algorithm. The search is replayed step by step: try the
 * fastest per-channel speed that fits, then slower ones while they stay above half the best, keep the
 * graph with the most total bandwidth, double the channels of a fast graph, then try faster speeds
 * with the channels found. What the real search decides from the exact wiring (which GPU pairs, which
 * NIC a channel uses) is replaced by capacities: a link carries floor(bandwidth / speed) channels.
 */
import { DUP_CHANNELS, MAX_RING_CHANNELS, SPEED_STEP_FLOOR, SPEEDS } from './nccl-tuning.ts';

/** What NCCL's topology detection finds for one communicator. */
export interface NcclSystem {
  /** The GPUs' compute capability (90 Hopper, 80 Ampere, 70 Volta). */
  computeCapability: number;
  /** The communicator's GPUs on its busiest node. */
  localGpus: number;
  /** Nodes the communicator spans. NCCL drops the NICs of a one-node communicator (paths.cc ncclTopoTrimSystem). */
  nodes: number;
  /** One GPU's NVLink (through NVSwitches) or PCIe bandwidth, GB/s one way, as NCCL counts it. */
  gpuBw: number;
  /** GPUs reach each other over NVLink (else PCIe). */
  nvlink: boolean;
  /** NICs the communicator's GPUs on one node use, each of `nicBw` behind a PCIe path of `pcieBw`. */
  nics: number;
  nicBw: number;
  pcieBw: number;
  /** NVLink SHARP (multicast in the NVSwitches) is there. */
  nvls: boolean;
}

export interface NcclGraph {
  nChannels: number;
  bwIntra: number;
  bwInter: number;
}

export interface NcclGraphs {
  ring: NcclGraph;
  tree: NcclGraph;
  /** Absent where NCCL finds no NVLS support (ncclNvlsInit: Hopper NVSwitch and more than 2 GPUs). */
  nvls: NcclGraph | undefined;
}

/** A search pattern: how many channels a speed allows inside a node and over the network. */
interface Pattern {
  intraChannels(speed: number): number;
  interChannels(speed: number): number;
  minChannels: number;
  maxChannels: number;
  better(candidate: NcclGraph, best: NcclGraph): boolean;
  /** search.cc: the total bandwidth a GPU has, scaled by n/(n-1) for patterns other than the ring. */
  totalBw: number;
  /** search.cc getMaxBw: the fastest path a channel takes (GPU to GPU, or GPU to NIC across nodes). */
  maxBw: number;
}

/** Channels of `speed` a link of `bandwidth` carries; a hair of slack for NCCL's rounding (SUB_ROUND). */
function channelsOn(bandwidth: number, speed: number): number {
  return Math.floor(bandwidth / speed + 1e-9);
}

function speedsOf(system: NcclSystem): readonly number[] {
  const hopper = system.computeCapability >= 90;
  if (system.nodes > 1) return hopper ? SPEEDS.sm90Inter : SPEEDS.inter;
  return hopper ? SPEEDS.sm90Intra : SPEEDS.intra;
}

/** The path from a GPU to its NIC: the NIC's bandwidth, capped by the PCIe link to it. */
const netPathBw = (system: NcclSystem) => Math.min(system.nicBw, system.pcieBw);

/** search.cc getMaxBw: the fastest path a channel can take, GPU to GPU in a node, GPU to NIC across nodes. */
const maxPathBw = (system: NcclSystem) => (system.nodes > 1 ? netPathBw(system) : system.gpuBw);

/** Across nodes, each channel enters and leaves through a NIC of the node. */
function nicChannels(system: NcclSystem): (speed: number) => number {
  if (system.nodes === 1) return () => Number.POSITIVE_INFINITY;
  const pathBw = netPathBw(system);
  return (speed) => (speed > pathBw ? 0 : system.nics * channelsOn(pathBw, speed));
}

const moreBandwidth = (candidate: NcclGraph, best: NcclGraph) =>
  candidate.nChannels * candidate.bwIntra > best.nChannels * best.bwIntra;

/**
 * Ring and tree channels: inside a node each GPU sends and receives once a channel; across nodes a
 * channel enters and leaves through NICs, so only (n-1)/n of the GPUs send it over NVLink.
 */
function chainPattern(system: NcclSystem, minChannels: number, maxChannels: number, ring: boolean): Pattern {
  const { localGpus: gpus, gpuBw } = system;
  const net = system.nodes > 1;
  const share = net ? (gpus - 1) / gpus : 1;
  return {
    // A channel needs its whole speed on every link it crosses; the links share the channels.
    intraChannels: (speed) =>
      gpus <= 1 ? Number.POSITIVE_INFINITY : speed > gpuBw ? 0 : channelsOn(gpuBw, speed * share),
    interChannels: nicChannels(system),
    minChannels,
    maxChannels,
    better: moreBandwidth,
    totalBw: !ring && gpus > 1 ? (gpuBw * gpus) / (gpus - 1) : gpuBw,
    maxBw: maxPathBw(system),
  };
}

/**
 * NVLS channels (search.cc ncclTopoSearchTryNvls): every GPU sends and receives a channel's bandwidth
 * through the NVSwitch and the channel's head GPU twice; across nodes each head also uses a NIC.
 */
function nvlsPattern(system: NcclSystem): Pattern {
  const { localGpus: gpus, gpuBw } = system;
  return {
    intraChannels: (speed) => Math.min(gpus, channelsOn(gpuBw, speed) - 1),
    interChannels: nicChannels(system),
    // A one-node NVLS graph must pull evenly from every GPU (search.cc: minChannels = maxChannels = ngpus).
    minChannels: system.nodes > 1 ? 1 : gpus,
    maxChannels: gpus,
    // search.cc ncclTopoCompareGraphs: for NVLS, more channels first, then more network bandwidth.
    better: (candidate, best) =>
      candidate.nChannels > best.nChannels ||
      candidate.nChannels * candidate.bwInter > best.nChannels * best.bwInter,
    totalBw: (gpuBw * gpus) / (gpus - 1),
    maxBw: maxPathBw(system),
  };
}

/** Pass 1 of ncclTopoCompute: the best graph over decreasing speeds. */
function firstPass(speeds: readonly number[], pattern: Pattern): NcclGraph | undefined {
  let index = speeds.findIndex(
    (speed) => speed <= pattern.maxBw && speed * pattern.minChannels <= pattern.totalBw,
  );
  if (index < 0) index = speeds.length - 1;
  let best: NcclGraph | undefined;
  for (;;) {
    const speed = speeds[index];
    const channels = Math.min(
      pattern.maxChannels,
      pattern.intraChannels(speed),
      pattern.interChannels(speed),
    );
    const graph = { nChannels: channels, bwIntra: speed, bwInter: speed };
    if (channels >= pattern.minChannels && channels > 0 && (!best || pattern.better(graph, best)))
      best = graph;
    // A perfect graph (every channel wanted), or one that uses all of a GPU's bandwidth, ends the search.
    if (channels === pattern.maxChannels) break;
    if (best && best.nChannels * best.bwInter >= pattern.totalBw) break;
    const next = speeds[index + 1];
    if (next === undefined || (best && next / best.bwInter <= SPEED_STEP_FLOOR)) break;
    index++;
  }
  return best;
}

/** search.cc ncclTopoDupChannels: a fast graph's channels are doubled, each with half the bandwidth. */
function dupChannels(graph: NcclGraph, computeCapability: number, maxChannels: number): NcclGraph {
  if (graph.bwIntra < DUP_CHANNELS.minBw) return graph;
  if (
    computeCapability > 80 &&
    graph.bwIntra < DUP_CHANNELS.sm90MinBw &&
    graph.nChannels > DUP_CHANNELS.sm90MaxChannels
  ) {
    return graph;
  }
  const channels = Math.min(graph.nChannels * 2, maxChannels);
  const divisor = Math.ceil(channels / graph.nChannels);
  return { nChannels: channels, bwIntra: graph.bwIntra / divisor, bwInter: graph.bwInter / divisor };
}

/** Pass 2, ring: faster speeds with at least the channels found. */
function raiseRing(speeds: readonly number[], pattern: Pattern, graph: NcclGraph): NcclGraph {
  let best = graph;
  for (const speed of speeds.filter((s) => s > graph.bwInter)) {
    const channels = Math.min(
      pattern.maxChannels,
      pattern.intraChannels(speed),
      pattern.interChannels(speed),
    );
    const candidate = { nChannels: channels, bwIntra: speed, bwInter: speed };
    if (channels >= graph.nChannels && pattern.better(candidate, best)) best = candidate;
  }
  return best;
}

/**
 * Pass 2 for trees (bwIntra) and NVLS (bwInter): one side's speed goes up a step at a time, the
 * channels fixed, while it stays under twice the other side's and the links still carry it.
 */
function raiseSide(
  speeds: readonly number[],
  graph: NcclGraph,
  side: 'bwIntra' | 'bwInter',
  carries: (speed: number) => number,
): NcclGraph {
  const other = side === 'bwIntra' ? 'bwInter' : 'bwIntra';
  let index = speeds.findIndex((speed) => speed <= graph.bwInter);
  const raised = { ...graph };
  while (index > 0 && raised[side] < raised[other] * 2) {
    const speed = speeds[index - 1];
    if (carries(speed) < raised.nChannels) break;
    raised[side] = speed;
    index--;
  }
  return raised;
}

/** search.cc: no graph found falls back to one channel of 0.1 GB/s in simple order. */
const FALLBACK: NcclGraph = { nChannels: 1, bwIntra: 0.1, bwInter: 0.1 };

function searchChain(system: NcclSystem, minChannels: number, maxChannels: number, ring: boolean): NcclGraph {
  const speeds = speedsOf(system);
  const pattern = chainPattern(system, minChannels, maxChannels, ring);
  const found = firstPass(speeds, pattern);
  if (!found) return FALLBACK;
  const doubled = dupChannels(found, system.computeCapability, maxChannels);
  return ring
    ? raiseRing(speeds, pattern, doubled)
    : raiseSide(speeds, doubled, 'bwIntra', pattern.intraChannels);
}

function searchNvls(system: NcclSystem): NcclGraph | undefined {
  const supported = system.nvls && system.nvlink && system.computeCapability >= 90 && system.localGpus > 2;
  if (!supported) return undefined;
  const speeds = speedsOf(system);
  const pattern = nvlsPattern(system);
  const found = firstPass(speeds, pattern);
  return found && raiseSide(speeds, found, 'bwInter', pattern.interChannels);
}

/**
 * The ring, tree and NVLS graphs of a communicator (src/init.cc: the tree gets the ring's channel
 * count, and both keep the smaller of the two).
 */
export function searchGraphs(system: NcclSystem): NcclGraphs {
  const ring = searchChain(system, 1, MAX_RING_CHANNELS, true);
  const tree = searchChain(system, ring.nChannels, ring.nChannels, false);
  const channels = Math.min(ring.nChannels, tree.nChannels);
  return {
    ring: { ...ring, nChannels: channels },
    tree: { ...tree, nChannels: channels },
    nvls: searchNvls(system),
  };
}
