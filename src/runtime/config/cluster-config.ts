/**
 * ClusterConfig: the validated, camelCase form of a cluster config file (the
 * seed's snake_case schema, docs/guides/p2p-and-compression.md, "Cluster config"). It lives in runtime/ because
 * the launchers carry it to every rank; the layers above (p2p) read it.
 *
 * ```yaml
 * cluster:
 *   collective:
 *     tensor_buffer_pool: { max_bytes: 2147483648 }
 *     tensor_compression: { codec: zstd, level: 3, max_inflight: 4, min_bytes: 16384, excluded_dtypes: [float32] }
 *     max_message_bytes: 17179869184     # the most tensor bytes one p2p message may declare (default 16 GiB)
 *   net_emulation:
 *     mode: account                     # or real (default): sends really wait
 *     groups:
 *       trainers: { workers: [actor-0, actor-1], uplink_mbps: 1000, downlink_mbps: 1000 }
 *       rollouts: { workers: [rollout-0], uplink_mbps: 100, downlink_mbps: 100 }
 *     latency:                          # one-way; an entry covers both directions unless the reverse is listed
 *       - { from: trainers, to: rollouts, one_way_ms: 20 }
 * ```
 */
import type { DType } from '../../tensor/dtype.ts';

export type CompressionCodec = 'lz4' | 'zstd';

interface CompressionCommon {
  /** Default true when the block is present. */
  enabled: boolean;
  /** Tensors smaller than this many bytes stay raw (default 16384). */
  minBytes: number;
  /** Dtypes never compressed (default ['float32']; [] makes every dtype eligible). */
  excludedDtypes: DType[];
}

export interface Lz4CompressionConfig extends CompressionCommon {
  codec: 'lz4';
  /**
   * ≥ 1 (default 1). lz4-napi's block codec has a single speed, so this is
   * validated and carried but does not change the output today.
   */
  acceleration: number;
}

export interface ZstdCompressionConfig extends CompressionCommon {
  codec: 'zstd';
  /** 1..22 (default 1). */
  level: number;
  /** zstd operations at once per worker, compression and decompression together (default 4). */
  maxInflight: number;
}

export type TensorCompressionConfig = Lz4CompressionConfig | ZstdCompressionConfig;

export interface TensorBufferPoolConfig {
  /** Active + cached buffer capacity per worker (default 2 GiB). */
  maxBytes: number;
}

export interface CollectiveConfig {
  tensorBufferPool?: TensorBufferPoolConfig;
  tensorCompression?: TensorCompressionConfig;
  /**
   * The most tensor bytes one p2p message may declare (default 16 GiB): a receiver allocates what a
   * header declares before the data comes, so a larger declaration is refused, never allocated.
   */
  maxMessageBytes?: number;
}

/** `real`: sends wait for what the link would take. `account`: nothing waits; a virtual clock per link predicts it. */
export type NetEmulationMode = 'real' | 'account';

export interface NetEmulationGroup {
  /** Worker names (`ctx.name`); every worker of the job must be in exactly one group. */
  workers: string[];
  uplinkMbps: number;
  downlinkMbps: number;
}

export interface NetEmulationLatency {
  from: string;
  to: string;
  oneWayMs: number;
}

export interface NetEmulationConfig {
  mode: NetEmulationMode;
  groups: Record<string, NetEmulationGroup>;
  /** Pairs not listed (a group with itself included) have no latency. */
  latency: NetEmulationLatency[];
}

export interface ClusterConfig {
  collective: CollectiveConfig;
  netEmulation?: NetEmulationConfig;
}
