/**
 * The built-in topologies. Bandwidths are NCCL's own figures for the hardware (src/graph/topo.h,
 * topo.cc of NCCL 2.23.4), so the search finds what it finds on the real machines: NVLink 4 is 18
 * links x 20.6 GB/s on H100 and H200 (NCCL prices both alike), NVLink 3 12 links x 20 GB/s on A100,
 * an NDR 400 Gb/s NIC 50 GB/s behind PCIe Gen5 x16 (48 GB/s).
 */
import { NVLINK_BW_PER_LINK, PCIE_X16_BW } from './nccl-tuning.ts';
import type { TopologyPresetName, TopologySpec } from './topology-spec.ts';

const HOPPER_NVLINK = { kind: 'nvlink', bandwidthGBps: 18 * NVLINK_BW_PER_LINK.sm90 } as const;

/** One DGX/HGX node: 8 GPUs on NVSwitches. */
function oneNode(name: string, spec: Partial<TopologySpec>): TopologySpec {
  return { name, nodes: 1, gpusPerNode: 8, intraNode: HOPPER_NVLINK, ...spec };
}

export const PRESETS: Readonly<Record<TopologyPresetName, TopologySpec>> = {
  'h100-nvlink': oneNode('h100-nvlink', { computeCapability: 90, nvls: true }),
  'h200-nvlink': oneNode('h200-nvlink', { computeCapability: 90, nvls: true }),
  'a100-nvlink': oneNode('a100-nvlink', {
    computeCapability: 80,
    intraNode: { kind: 'nvlink', bandwidthGBps: 12 * NVLINK_BW_PER_LINK.sm80 },
    nvls: false,
  }),
  // DGX H100: a NIC per GPU; 2 nodes unless `nodes` says otherwise.
  'h100-ib': oneNode('h100-ib', {
    nodes: 2,
    computeCapability: 90,
    nvls: true,
    interNode: { kind: 'ib', bandwidthGBps: 400 / 8, nics: 8, pcieGBps: PCIE_X16_BW.gen5 },
  }),
};
