/**
 * The shape of a topology as users write it (in code, YAML or JSON): nodes of GPUs, the links inside
 * a node and between nodes, and where ranks sit.
 */

/**
 * What the alpha-beta model adds to a link of its kinds (predict/alpha-beta.ts), for machines whose
 * links are not one bandwidth each way: tensorcomm predict calibrate fits both. Absent, the link is
 * full-duplex and reductions cost nothing, the plain model.
 */
export interface AlphaBetaRates {
  /**
   * GB/s each way while a rank sends and receives at once (ring steps, pairwise exchanges), where
   * both ways share what carries them (two processes' cores and memory bus, one loopback). Default
   * bandwidthGBps. Between nodes, per NIC.
   */
  duplexGBps?: number;
  /** GB/s of operand a rank reduces into its result (allReduce, reduceScatter, reduce). Default: free. */
  reduceGBps?: number;
}

/**
 * Inside a node. `nvlink` and `pcie` are NCCL's links (its tuning model prices them); `alpha-beta`
 * is any other (host memory between processes, "this machine" as calibration measures it).
 */
export interface IntraNodeLink extends AlphaBetaRates {
  kind: 'nvlink' | 'pcie' | 'alpha-beta';
  /**
   * GB/s one way, per GPU. For NVLink, as NCCL counts it: links x 20.6 on Hopper (18 links: 370.8),
   * links x 20 on Ampere (12 links: 240), NVSwitches assumed between the GPUs.
   */
  bandwidthGBps: number;
  /**
   * Microseconds. For `alpha-beta`, alpha (required); for NCCL's links, added to each step's latency
   * from NCCL's table (default 0).
   */
  latencyUs?: number;
}

/**
 * Between nodes. `ib` and `roce` are NCCL's network (its tuning model prices them); `ethernet` (plain
 * TCP) and `alpha-beta` use the alpha-beta model.
 */
export interface InterNodeLink extends AlphaBetaRates {
  kind: 'ib' | 'roce' | 'ethernet' | 'alpha-beta';
  /** GB/s one way, per NIC (400 Gb/s NDR: 50). */
  bandwidthGBps: number;
  /**
   * Microseconds. For `ethernet` and `alpha-beta`, alpha (required); for NCCL's network, what the
   * network adds to each inter-node step (NCCL's graph latencyInter; default 0, as NCCL's IB plugin says).
   */
  latencyUs?: number;
  /** NICs per node (default 1); the alpha-beta model stripes a message over them. */
  nics?: number;
  /**
   * GB/s of the PCIe path from a GPU to its NIC, which caps a channel (NCCL's kinds only; default 48
   * for Hopper's PCIe Gen5 x16, 24 for Gen4 before).
   */
  pcieGBps?: number;
}

/** The GPU a rank runs on. */
export interface GpuPlacement {
  node: number;
  gpu: number;
}

/** A whole topology. */
export interface TopologySpec {
  /** Shown in reports. */
  name: string;
  nodes: number;
  gpusPerNode: number;
  /** Rank r's GPU at index r; by default rank r is on node floor(r / gpusPerNode), GPU r % gpusPerNode. */
  placement?: GpuPlacement[];
  /** The GPUs' compute capability: 90 Hopper (default), 80 Ampere, 70 Volta; NCCL's tables depend on it. */
  computeCapability?: number;
  intraNode: IntraNodeLink;
  /** Required when nodes > 1. */
  interNode?: InterNodeLink;
  /** NVLink SHARP (NVSwitch multicast; Hopper and NVLink only). Default false. */
  nvls?: boolean;
  /** Microseconds added to every call (host-side launch cost beyond NCCL's base latencies). Default 0. */
  launchOverheadUs?: number;
}

export type TopologyPresetName = 'h100-nvlink' | 'h200-nvlink' | 'a100-nvlink' | 'h100-ib';
export const TOPOLOGY_PRESETS: readonly TopologyPresetName[] = [
  'h100-nvlink',
  'h200-nvlink',
  'a100-nvlink',
  'h100-ib',
];

/** A preset with some of its fields replaced; `intraNode` and `interNode` merge field by field. */
export interface TopologyPresetRef extends Partial<Omit<TopologySpec, 'intraNode' | 'interNode'>> {
  preset: TopologyPresetName;
  intraNode?: Partial<IntraNodeLink>;
  interNode?: Partial<InterNodeLink>;
}

/**
 * A link with its defaults filled in, but for the fields some kinds lack (`pcieGBps` on the alpha-beta
 * model's) or whose default is to be absent (the alpha-beta rates: D = B, free reductions).
 */
export type ResolvedLink<L, Optional extends keyof L> = Required<Omit<L, Optional>> & Pick<L, Optional>;

/** A topology with every default filled in: itself a TopologySpec, which loadTopology takes back as is. */
export interface ResolvedTopologySpec extends TopologySpec {
  placement: GpuPlacement[] | undefined;
  computeCapability: number;
  intraNode: ResolvedLink<IntraNodeLink, keyof AlphaBetaRates>;
  interNode: ResolvedLink<InterNodeLink, keyof AlphaBetaRates | 'pcieGBps'> | undefined;
  nvls: boolean;
  launchOverheadUs: number;
}
