/**
 * Which model prices a group's calls, from the links its placement crosses: NCCL's (NVLink or PCIe
 * inside a node, InfiniBand or RoCE between nodes) or the alpha-beta model (any link of kind
 * `alpha-beta`, or Ethernet between nodes). Models are cached per topology and group shape, since
 * predict mode asks for the same groups call after call.
 */
import type { AlphaBetaLink } from './alpha-beta.ts';
import { slowestLink } from './alpha-beta.ts';
import type { GroupShape } from './group-shape.ts';
import { type NcclSystem, searchGraphs } from './nccl-graph.ts';
import type { NcclComm } from './nccl-model.ts';
import { type P2pLinks, p2pLinks } from './nccl-p2p.ts';
import type { Topology } from './topology.ts';
import type { AlphaBetaRates, ResolvedTopologySpec } from './topology-spec.ts';

export type GroupModel =
  | { kind: 'nccl'; comm: NcclComm; p2p: P2pLinks }
  | { kind: 'alpha-beta'; group: AlphaBetaLink; intra: AlphaBetaLink; inter: AlphaBetaLink | undefined };

const cache = new WeakMap<Topology, Map<string, GroupModel>>();

/** NICs a node's `gpus` GPUs of the group reach directly (their share of the node's NICs, at least one). */
function nicsFor(spec: ResolvedTopologySpec, gpus: number): number {
  return Math.max(1, Math.round(((spec.interNode?.nics ?? 1) * gpus) / spec.gpusPerNode));
}

function ncclSystem(spec: ResolvedTopologySpec, nodes: number, localGpus: number): NcclSystem {
  return {
    computeCapability: spec.computeCapability,
    localGpus,
    nodes,
    gpuBw: spec.intraNode.bandwidthGBps,
    nvlink: spec.intraNode.kind === 'nvlink',
    nics: nodes > 1 ? nicsFor(spec, localGpus) : 0,
    nicBw: spec.interNode?.bandwidthGBps ?? 0,
    pcieBw: spec.interNode?.pcieGBps ?? 0,
    nvls: spec.nvls,
  };
}

function ncclModel(spec: ResolvedTopologySpec, shape: GroupShape): GroupModel {
  const system = ncclSystem(spec, shape.nodes, shape.localMax);
  const intraLatencyUs = spec.intraNode.latencyUs;
  const latencyInterUs = spec.interNode?.latencyUs ?? 0;
  const machine = ncclSystem(spec, spec.interNode && shape.nodes > 1 ? 2 : 1, 2);
  return {
    kind: 'nccl',
    comm: {
      nRanks: shape.size,
      nNodes: shape.nodes,
      system,
      graphs: searchGraphs(system),
      intraLatencyUs,
      latencyInterUs,
    },
    p2p: p2pLinks(machine, intraLatencyUs, latencyInterUs, nicsFor(spec, 1)),
  };
}

/** A link of the spec as the alpha-beta model takes it, its bandwidths times the `stripes` a message is cut over. */
function alphaBetaLink(
  link: { latencyUs: number; bandwidthGBps: number } & AlphaBetaRates,
  stripes: number,
): AlphaBetaLink {
  return {
    alphaUs: link.latencyUs,
    bandwidthGBps: link.bandwidthGBps * stripes,
    duplexGBps: link.duplexGBps === undefined ? undefined : link.duplexGBps * stripes,
    // A rank reduces what it received alone, however many NICs brought it.
    reduceGBps: link.reduceGBps,
  };
}

function alphaBetaModel(spec: ResolvedTopologySpec, shape: GroupShape): GroupModel {
  const intra = alphaBetaLink(spec.intraNode, 1);
  // A message is striped over the node's NICs.
  const inter = spec.interNode && alphaBetaLink(spec.interNode, spec.interNode.nics);
  const crossed = shape.nodes === 1 || !inter ? [intra] : shape.localMax > 1 ? [intra, inter] : [inter];
  return { kind: 'alpha-beta', group: slowestLink(crossed), intra, inter };
}

function usesAlphaBeta(spec: ResolvedTopologySpec, shape: GroupShape): boolean {
  if (spec.intraNode.kind === 'alpha-beta') return true;
  const kind = spec.interNode?.kind;
  return shape.nodes > 1 && (kind === 'ethernet' || kind === 'alpha-beta');
}

/** The model of a group of this shape on this topology. */
export function groupModel(topology: Topology, shape: GroupShape): GroupModel {
  let models = cache.get(topology);
  if (!models) cache.set(topology, (models = new Map()));
  const key = `${shape.size}/${shape.nodes}/${shape.localMax}`;
  let model = models.get(key);
  if (!model) {
    const { spec } = topology;
    model = usesAlphaBeta(spec, shape) ? alphaBetaModel(spec, shape) : ncclModel(spec, shape);
    models.set(key, model);
  }
  return model;
}
