/**
 * Point-to-point transfers over NCCL's links, and the collectives NCCL builds from them (send/recv,
 * allToAll, gather, scatter). tuning.cc has no cost model for these, so this is tensorcomm's, in its
 * terms: a transfer costs one ring step's latency (baseLat + hwLat of the ring, for the link it
 * crosses) plus bytes over the bandwidth NCCL's search gives a pair of GPUs on that link; LL below
 * NCCL_P2P_LL_THRESHOLD, Simple above (enqueue.cc). A collective's transfers run at once: a rank's
 * transfers inside its node share its NVLink, those to other nodes its NICs, and the slower side
 * decides.
 */
import { type NcclSystem, searchGraphs } from './nccl-graph.ts';
import {
  BASE_LATENCY_US,
  compCapIndex,
  HW_LATENCY_US,
  LL_MAX_BW,
  P2P_LL_THRESHOLD_BYTES,
  REFINEMENT,
} from './nccl-tuning.ts';

export type P2pProtocol = 'LL' | 'Simple';

/** One kind of link between two GPUs: the latency and bandwidth of a transfer per protocol. */
export interface P2pLink {
  latencyUs: Readonly<Record<P2pProtocol, number>>;
  bw: Readonly<Record<P2pProtocol, number>>;
}

/** The links a communicator's transfers take: inside a node, and (when it spans nodes) across. */
export interface P2pLinks {
  intra: P2pLink;
  inter: P2pLink | undefined;
}

export interface P2pTime {
  us: number;
  protocol: P2pProtocol;
}

/** What a rank's transfers of one call cross: pieces to peers on its node and to peers elsewhere. */
export interface P2pFanout {
  localPeers: number;
  remotePeers: number;
  pieceBytes: number;
}

/**
 * The transfer links of a machine: a pair of GPUs on one node, and a pair on two nodes, each
 * searched as NCCL would search a two-rank communicator.
 */
export function p2pLinks(
  system: NcclSystem,
  intraLatencyUs: number,
  latencyInterUs: number,
  nicsPerGpu: number,
): P2pLinks {
  const cap = compCapIndex(system.computeCapability);
  const pair = searchGraphs({ ...system, localGpus: 2, nodes: 1, nics: 0 }).ring;
  const pairBw = pair.nChannels * pair.bwIntra;
  const intraHw = system.nvlink ? 'nvlink' : 'pci';
  const intra: P2pLink = {
    latencyUs: {
      LL: BASE_LATENCY_US.ring.LL + HW_LATENCY_US[intraHw].ring.LL + intraLatencyUs,
      Simple: BASE_LATENCY_US.ring.Simple + HW_LATENCY_US[intraHw].ring.Simple + intraLatencyUs,
    },
    bw: { LL: Math.min(LL_MAX_BW[cap][0], pairBw * REFINEMENT.ringLL), Simple: pairBw },
  };
  if (system.nodes === 1) return { intra, inter: undefined };
  const remote = searchGraphs({ ...system, localGpus: 1, nodes: 2, nics: nicsPerGpu }).ring;
  const remoteBw = remote.nChannels * remote.bwInter;
  const inter: P2pLink = {
    latencyUs: {
      LL: BASE_LATENCY_US.ring.LL + HW_LATENCY_US.net.ring.LL + latencyInterUs,
      Simple: BASE_LATENCY_US.ring.Simple + HW_LATENCY_US.net.ring.Simple + 2 * latencyInterUs,
    },
    // Across nodes the LL cap is the CPU vendor's (Intel assumed), two nodes.
    bw: { LL: Math.min(LL_MAX_BW[0][1], remoteBw * REFINEMENT.ringLL), Simple: remoteBw },
  };
  return { intra, inter };
}

function protocolFor(pieceBytes: number): P2pProtocol {
  return pieceBytes <= P2P_LL_THRESHOLD_BYTES ? 'LL' : 'Simple';
}

/** `bytes` over `link` in pieces of `pieceBytes`: one latency, since the pieces go out together. */
function stream(link: P2pLink, bytes: number, pieceBytes: number): number {
  if (bytes === 0) return 0;
  const protocol = protocolFor(pieceBytes);
  return link.latencyUs[protocol] + bytes / (1000 * link.bw[protocol]);
}

/** One transfer of `bytes` between two GPUs, on one node or across two. */
export function p2pSend(links: P2pLinks, bytes: number, sameNode: boolean): P2pTime {
  return { us: stream(sameNode ? links.intra : interOf(links), bytes, bytes), protocol: protocolFor(bytes) };
}

/** A rank's fan-out of equal pieces (allToAll, gather's root, scatter's root): its slower side. */
export function p2pFanout(links: P2pLinks, fanout: P2pFanout): P2pTime {
  const { localPeers, remotePeers, pieceBytes } = fanout;
  const local = stream(links.intra, localPeers * pieceBytes, pieceBytes);
  const remote = remotePeers > 0 ? stream(interOf(links), remotePeers * pieceBytes, pieceBytes) : 0;
  return { us: Math.max(local, remote), protocol: protocolFor(pieceBytes) };
}

/**
 * torch's monitored barrier: rank 0 receives from every other rank in turn and answers each, one
 * small message at a time.
 */
export function p2pRoundTrips(
  links: P2pLinks,
  localPeers: number,
  remotePeers: number,
  bytes: number,
): P2pTime {
  const local = localPeers * 2 * stream(links.intra, bytes, bytes);
  const remote = remotePeers > 0 ? remotePeers * 2 * stream(interOf(links), bytes, bytes) : 0;
  return { us: local + remote, protocol: protocolFor(bytes) };
}

function interOf(links: P2pLinks): P2pLink {
  if (!links.inter) throw new RangeError('a transfer between nodes on a one-node communicator');
  return links.inter;
}
