/**
 * NCCL's cost model for collectives (src/graph/tuning.cc of NCCL 2.23.4): for every algorithm and
 * protocol NCCL may run a collective with, a latency and a bandwidth (ncclTopoTuneModel); the time of
 * one call is latency + bytes / bandwidth with NCCL's corrections (ncclTopoGetAlgoTime), and NCCL runs
 * the cheapest (enqueue.cc topoGetAlgoInfo). Bytes are NCCL's: the whole output of allGather, the
 * whole input of reduceScatter, the buffer of the others, as nccl-tests counts them.
 */
import type { NcclGraph, NcclGraphs, NcclSystem } from './nccl-graph.ts';
import {
  ALGBW_RATIO,
  BASE_LATENCY_US,
  compCapIndex,
  type HardwareClass,
  HW_LATENCY_US,
  LL_MAX_BW,
  log2i,
  NCCL_ALGORITHMS,
  NCCL_PROTOCOLS,
  type NcclAlgorithm,
  type NcclProtocol,
  NET_OVERHEAD_SIMPLE_FACTOR,
  NET_OVERHEAD_US,
  PAT_LATENCY,
  PER_CHANNEL_MAX_RING_LL128_BW,
  PER_CHANNEL_MAX_TREE_BW,
  PER_CHANNEL_MAX_TREE_LL128_BW,
  REFINEMENT,
  ringPlateauFactor,
  TREE_CORRECTION,
} from './nccl-tuning.ts';

export type NcclCollective = 'allReduce' | 'broadcast' | 'reduce' | 'allGather' | 'reduceScatter';

/** One communicator as the model sees it. */
export interface NcclComm {
  nRanks: number;
  nNodes: number;
  system: NcclSystem;
  graphs: NcclGraphs;
  /** Added to every intra-node step's latency (the topology's intraNode.latencyUs). */
  intraLatencyUs: number;
  /** NCCL's graph latencyInter: what the network adds to an inter-node step (the topology's interNode.latencyUs). */
  latencyInterUs: number;
}

/** An algorithm and protocol's latency (us) and algorithm bandwidth (GB/s). */
export interface NcclCost {
  latencyUs: number;
  bw: number;
}

export interface NcclChoice {
  algorithm: NcclAlgorithm;
  protocol: NcclProtocol;
  us: number;
}

/** tuning.cc `nsteps`: the ring steps of one call. */
function ringSteps(coll: NcclCollective, nRanks: number): number {
  if (coll === 'allReduce') return 2 * (nRanks - 1);
  if (coll === 'allGather' || coll === 'reduceScatter') return nRanks - 1;
  return nRanks;
}

/** Which algorithms NCCL considers for a collective (tuning.cc, enqueue.cc updateCollCostTable). */
function eligible(comm: NcclComm, coll: NcclCollective, algorithm: NcclAlgorithm): NcclGraph | undefined {
  const { graphs, nNodes, nRanks } = comm;
  switch (algorithm) {
    case 'ring':
      return graphs.ring;
    case 'tree':
      return coll === 'allReduce' ? graphs.tree : undefined;
    case 'nvls':
      // Without CollNet, NVLS is one node only; allGather/reduceScatter too (enqueue.cc).
      return coll !== 'broadcast' && coll !== 'reduce' && nNodes === 1 ? graphs.nvls : undefined;
    case 'nvls-tree':
      return coll === 'allReduce' && nNodes > 1 ? graphs.nvls : undefined;
    case 'pat':
      // ncclPatEnable: one GPU per node.
      return (coll === 'allGather' || coll === 'reduceScatter') && nNodes > 1 && nNodes === nRanks
        ? graphs.ring
        : undefined;
  }
}

/**
 * tuning.cc: LL128 is on by default only over NVLink within nodes (typeIntra up to NVB; a lone GPU per
 * node counts as local), on Volta, Ampere and Hopper exactly.
 */
function ll128Enabled(system: NcclSystem): boolean {
  const cc = system.computeCapability;
  return (system.nvlink || system.localGpus === 1) && (cc === 70 || cc === 80 || cc === 90);
}

function protocolAllowed(comm: NcclComm, algorithm: NcclAlgorithm, protocol: NcclProtocol): boolean {
  if (algorithm === 'nvls' || algorithm === 'nvls-tree' || algorithm === 'pat') return protocol === 'Simple';
  return protocol !== 'LL128' || ll128Enabled(comm.system);
}

/** tuning.cc: the bus bandwidth, refined, then converted to algorithm bandwidth. */
function bandwidth(
  comm: NcclComm,
  coll: NcclCollective,
  algorithm: NcclAlgorithm,
  protocol: NcclProtocol,
  graph: NcclGraph,
): number {
  const { nNodes, nRanks, system } = comm;
  const cap = compCapIndex(system.computeCapability);
  const index2 = nNodes <= 2 ? nNodes - 1 : 2;
  // LL: the GPU generation on one node, the CPU vendor (Intel assumed: row 0) across nodes.
  const llMaxBw = LL_MAX_BW[nNodes === 1 ? cap : 0][index2];
  let bw = nNodes <= 2 ? graph.bwIntra : graph.bwInter;
  if (algorithm === 'nvls') bw = Math.min(graph.bwIntra, graph.bwInter);
  if (algorithm === 'nvls-tree')
    bw = Math.min(graph.bwIntra, nNodes <= 2 ? graph.bwInter : graph.bwInter / 2);
  let busBw = graph.nChannels * bw;

  if (algorithm === 'ring' && protocol === 'LL') busBw = Math.min(llMaxBw, busBw * REFINEMENT.ringLL);
  if (algorithm === 'ring' && protocol === 'LL128') {
    busBw = Math.min(
      busBw * REFINEMENT.ringLL128,
      graph.nChannels * PER_CHANNEL_MAX_RING_LL128_BW[cap][index2],
    );
  }
  if (algorithm === 'tree' && coll === 'allReduce') {
    busBw = Math.min(
      busBw * REFINEMENT.treeAllReduce,
      graph.nChannels * PER_CHANNEL_MAX_TREE_BW[cap][index2],
    );
  }
  if (algorithm === 'tree' && protocol === 'LL') busBw = Math.min(busBw * REFINEMENT.treeLL, llMaxBw);
  if (algorithm === 'tree' && protocol === 'LL128') {
    const factor = nNodes === 1 ? REFINEMENT.treeLL128OneNode : REFINEMENT.treeLL128Nodes;
    busBw = Math.min(busBw * factor, graph.nChannels * PER_CHANNEL_MAX_TREE_LL128_BW[cap][index2]);
  }
  if (algorithm === 'pat') busBw *= REFINEMENT.pat;

  // allGather and reduceScatter keep bus bandwidth for every algorithm but the ring.
  if (algorithm !== 'ring' && (coll === 'allGather' || coll === 'reduceScatter')) return busBw;
  if (algorithm === 'ring') return (busBw * nRanks) / ringSteps(coll, nRanks);
  if (algorithm === 'nvls' || algorithm === 'nvls-tree') return busBw * ALGBW_RATIO.nvls;
  return busBw * ALGBW_RATIO.tree;
}

/** tuning.cc `intraHw`: NVLink when the graph's GPUs talk over NVLink, else PCI (a lone GPU counts as PCI). */
function intraHardware(comm: NcclComm): HardwareClass {
  return comm.system.nvlink && comm.system.localGpus > 1 ? 'nvlink' : 'pci';
}

/** tuning.cc: the latency of one call of the algorithm. */
function latency(
  comm: NcclComm,
  coll: NcclCollective,
  algorithm: NcclAlgorithm,
  protocol: NcclProtocol,
): number {
  const { nNodes, nRanks } = comm;
  const intraHw = intraHardware(comm);
  const hw: HardwareClass = nNodes === 1 ? intraHw : 'net';
  const ppn = nRanks / nNodes;
  let intraLat = HW_LATENCY_US[intraHw][algorithm][protocol] + comm.intraLatencyUs;
  const interHop = HW_LATENCY_US.net[algorithm][protocol];
  // With one GPU per node the network latency is fully exposed: NCCL uses the tree's.
  const interLat =
    HW_LATENCY_US.net[ppn === 1 ? 'tree' : algorithm][protocol] +
    comm.latencyInterUs +
    (protocol === 'Simple' ? comm.latencyInterUs : 0); // the flush
  const base = BASE_LATENCY_US[algorithm][protocol];
  const nsteps = ringSteps(coll, nRanks);

  switch (algorithm) {
    case 'ring': {
      // sameChannels assumed: NCCL keeps the first graph it finds, which on symmetric machines reuses channels.
      if (coll === 'broadcast' || coll === 'reduce') return base + (hw === 'net' ? interHop : intraLat);
      const netOverhead =
        nNodes > 1 ? NET_OVERHEAD_US * (protocol === 'Simple' ? NET_OVERHEAD_SIMPLE_FACTOR : 1) : 0;
      intraLat = Math.max(intraLat, netOverhead);
      const interSteps = nNodes === 1 ? 0 : coll === 'allReduce' ? 2 * (nNodes - 1) : nNodes - 1;
      return base + (nsteps - interSteps) * intraLat + interSteps * interLat;
    }
    case 'tree':
      return base + 2 * ((Math.floor(nRanks / nNodes) - 1) * intraLat + log2i(nNodes) * interLat);
    case 'nvls':
      return intraLat + (nNodes > 1 ? interLat : 0);
    case 'nvls-tree':
      return base + intraLat + 2 * log2i(nNodes) * interLat;
    case 'pat':
      return (
        PAT_LATENCY.baseUs +
        log2i(nNodes) * (interLat / PAT_LATENCY.interDivisor) +
        nRanks * PAT_LATENCY.perRankUs
      );
  }
}

/** ncclTopoTuneModel for one collective: every algorithm and protocol NCCL would consider, with its cost. */
export function ncclCosts(
  comm: NcclComm,
  coll: NcclCollective,
): Map<`${NcclAlgorithm}/${NcclProtocol}`, NcclCost> {
  const costs = new Map<`${NcclAlgorithm}/${NcclProtocol}`, NcclCost>();
  for (const algorithm of NCCL_ALGORITHMS) {
    const graph = eligible(comm, coll, algorithm);
    if (!graph) continue;
    for (const protocol of NCCL_PROTOCOLS) {
      if (!protocolAllowed(comm, algorithm, protocol)) continue;
      costs.set(`${algorithm}/${protocol}`, {
        latencyUs: latency(comm, coll, algorithm, protocol),
        bw: bandwidth(comm, coll, algorithm, protocol, graph),
      });
    }
  }
  return costs;
}

/** ncclTopoGetAlgoTime: latency + bytes / bandwidth, with NCCL's tree and ring corrections. */
export function ncclAlgoTime(
  comm: NcclComm,
  coll: NcclCollective,
  algorithm: NcclAlgorithm,
  protocol: NcclProtocol,
  cost: NcclCost,
  nBytes: number,
): number {
  let { bw, latencyUs } = cost;
  const logSize = log2i(Math.floor(nBytes / 64));
  if (algorithm === 'tree' && coll === 'allReduce' && logSize >= 0 && logSize < 23) {
    bw *= TREE_CORRECTION[protocol][logSize];
  }
  const channels = comm.graphs.ring.nChannels;
  if (
    algorithm === 'ring' &&
    protocol === 'Simple' &&
    comm.nNodes > 1 &&
    coll === 'allReduce' &&
    Math.floor(nBytes / (channels * comm.nRanks)) >= 64
  ) {
    latencyUs *= ringPlateauFactor(comm.system.computeCapability);
  }
  // GB/s is 1e3 bytes per microsecond.
  return latencyUs + nBytes / (1000 * bw);
}

/**
 * The algorithm and protocol NCCL runs (the cheapest; ties to the first in NCCL's order), optionally
 * among `algorithms` only, as NCCL_ALGO would restrict it.
 */
export function chooseNccl(
  comm: NcclComm,
  coll: NcclCollective,
  nBytes: number,
  algorithms: readonly NcclAlgorithm[] = NCCL_ALGORITHMS,
): NcclChoice {
  let best: NcclChoice | undefined;
  for (const [key, cost] of ncclCosts(comm, coll)) {
    const [algorithm, protocol] = key.split('/') as [NcclAlgorithm, NcclProtocol];
    if (!algorithms.includes(algorithm)) continue;
    const us = ncclAlgoTime(comm, coll, algorithm, protocol, cost, nBytes);
    if (!best || us < best.us) best = { algorithm, protocol, us };
  }
  if (!best) throw new RangeError(`no NCCL algorithm among ${algorithms.join(', ')} runs ${coll} here`);
  return best;
}
