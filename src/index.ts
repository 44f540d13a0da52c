/**
 * tensorcomm: distributed tensor communication for Node.js. Everything public is exported here, and
 * only that: what users write against (the guides' and examples' names) and the types those take and
 * return. The machinery under ThreadGroup (backends, call descriptions, shared regions, slot tables,
 * abort words, reduction kernels) stays unexported: a public name is a promise kept forever.
 */
// The layers that register themselves with lower ones, and the rank setup the launchers load in every rank;
// no CUDA library loads until a GPU is asked for.
import './setup.ts';

export { type InitProcessOptions, initProcess } from './context/process-context.ts';
export type { RankContext, SplitGroupOptions } from './context/rank-context.ts';
export { type ContextExtension, extendRankContext } from './context/rank-context.ts';
export {
  type DeviceMemoryStats,
  DeviceOutOfMemoryError,
  deviceMemoryStats,
  releaseDeviceMemory,
} from './cuda/device-memory.ts';
export { CudaError, GpuUnavailableError } from './cuda/errors.ts';
export {
  describeRanks,
  dumpFlightRecorder,
  formatFlightRecorder,
  writeHangReport,
} from './debug/api.ts';
export type { CallEntry, CallStatus } from './debug/call-record.ts';
export type { DebugOptions } from './debug/options.ts';
export { DeviceMesh, type DeviceMeshOptions } from './dtensor/device-mesh.ts';
export { DTensor, distributeTensor, type FromLocalOptions } from './dtensor/dtensor.ts';
export {
  Partial,
  type PartialPlacement,
  type Placement,
  Replicate,
  type ReplicatePlacement,
  Shard,
  type ShardPlacement,
} from './dtensor/placement.ts';
export { gatherTensor, type StoreTransferOptions, scatterTensor } from './dtensor/scatter-gather.ts';
export {
  createJobDirectory,
  FileStoreCorruptError,
  FileStoreError,
  type FileStoreOptions,
  FileTensorStore,
  type JobDirectoryOptions,
  type RingChannelOptions,
  removeJobDirectory,
  ShmSpaceError,
} from './file-store/index.ts';
export { LaunchError } from './launch/errors.ts';
export { type LaunchOptions, launchProcesses, type OutputSink } from './launch/launch-processes.ts';
export { type SpawnThreadsOptions, spawnThreads } from './launch/spawn-threads.ts';
export {
  type MemoryStoreOptions,
  type MemoryStoreShared,
  MemoryTensorStore,
} from './memory-store/memory-tensor-store.ts';
export type { SlotTableSpec } from './memory-store/slot-table.ts';
export { NcclError } from './nccl/errors.ts';
export {
  type NetworkConnectOptions,
  type NetworkPeer,
  NetworkStoreBufferError,
  NetworkStoreFrameError,
  NetworkStoreHandshakeError,
  type NetworkStoreOptions,
  NetworkStoreProtocolError,
  NetworkTensorStore,
} from './network-store/index.ts';
export { Collective, type CollectiveHost } from './p2p/collective.ts';
export { type BroadcastOptions, CollectiveGroup, type GroupMembers } from './p2p/collective-group.ts';
export { type BufferPoolStats, type PooledBuffer, TensorBufferPool } from './p2p/compression/buffer-pool.ts';
export type { CompressionStats } from './p2p/compression/tensor-compressor.ts';
export { P2PCompressionError, P2PHeaderError, P2PProtocolError } from './p2p/errors.ts';
export type { NetReport, NetTransfer } from './p2p/netem/net-emulator.ts';
export type { TransferOptions } from './p2p/outbox.ts';
export type { AlphaBetaSchedule } from './predict/alpha-beta.ts';
export { TopologyError } from './predict/errors.ts';
export type { NcclAlgorithm, NcclProtocol } from './predict/nccl-tuning.ts';
export {
  type CollectivePrediction,
  type PredictAlgorithm,
  type PredictCollectiveInput,
  type PredictOp,
  type PredictProtocol,
  predictCollective,
} from './predict/predict-collective.ts';
export type { PredictOptions } from './predict/predict-options.ts';
export type { PredictClock } from './predict/rank-clock.ts';
export type { PredictedCall, PredictedRank, PredictReport } from './predict/report.ts';
export { loadTopology, type Topology, type TopologyInput } from './predict/topology.ts';
export type {
  AlphaBetaRates,
  GpuPlacement,
  InterNodeLink,
  IntraNodeLink,
  ResolvedLink,
  ResolvedTopologySpec,
  TopologyPresetName,
  TopologyPresetRef,
  TopologySpec,
} from './predict/topology-spec.ts';
export {
  type FutureWaitOptions,
  TensorFuture,
  type TensorFutureHandle,
} from './promise-future/tensor-future.ts';
export { createTensorPromise, TensorPromise } from './promise-future/tensor-promise.ts';
export { generateRendezvousSecret } from './rendezvous/auth.ts';
export {
  RendezvousClient,
  type RendezvousClientOptions,
  type RendezvousWaitOptions,
} from './rendezvous/client.ts';
export {
  RendezvousAuthError,
  RendezvousError,
  RendezvousTimeoutError,
  RendezvousUnreachableError,
} from './rendezvous/errors.ts';
export { RendezvousServer, type RendezvousServerOptions } from './rendezvous/server.ts';
export type { ServerLimitOptions, ServerLimits } from './rendezvous/server-limits.ts';
export type {
  ClusterConfig,
  CollectiveConfig,
  CompressionCodec,
  Lz4CompressionConfig,
  NetEmulationConfig,
  NetEmulationGroup,
  NetEmulationLatency,
  NetEmulationMode,
  TensorBufferPoolConfig,
  TensorCompressionConfig,
  ZstdCompressionConfig,
} from './runtime/config/cluster-config.ts';
export { loadClusterConfig } from './runtime/config/load.ts';
export { ClusterConfigError } from './runtime/config/validate.ts';
export {
  CollectiveMismatchError,
  CommTimeoutError,
  InjectedFaultError,
  InvalidStateError,
  JobFailedError,
  RankFailedError,
  TensorcommError,
  UnfinishedWorkError,
} from './runtime/errors.ts';
export type { ChaosOptions, FaultKind, FaultSpec } from './runtime/faults/options.ts';
export type { NetworkBytes, NetworkStats } from './runtime/network-stats.ts';
export type {
  StoreEntry,
  StoreFinishOptions,
  StoreSetOptions,
  StoreViewsEntry,
  StoreWaitOptions,
  TensorStore,
} from './runtime/tensor-store.ts';
export { type Executor, Work } from './runtime/work.ts';
export type { Scalar } from './tensor/convert.ts';
export { type Device, DTYPES, type DType, type TypedArray } from './tensor/dtype.ts';
export {
  bfloat16BitsToFloat32,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
} from './tensor/half.ts';
export { REDUCE_OPS, type ReduceOp } from './tensor/reduce-ops.ts';
export type { ShapeLike } from './tensor/shape.ts';
export { type AllcloseOptions, Tensor, type TensorOptions } from './tensor/tensor.ts';
export type { BorrowedTensor, BorrowedViews } from './thread-group/backend.ts';
export type { CollectiveReduceOp, PremulSum, Reduction } from './thread-group/reduction.ts';
export {
  type CallOptions,
  type GroupInfo,
  type MonitoredBarrierOptions,
  type P2POp,
  type P2POptions,
  type ReduceOptions,
  ThreadGroup,
} from './thread-group/thread-group.ts';
export { ThreadGroupManager } from './thread-group/thread-group-manager.ts';
export type { WeightSyncStats } from './weight-sync/delta.ts';
export { type ReceiveOptions, WeightSyncEngine } from './weight-sync/engine.ts';
export { WeightSyncError, WeightSyncHeaderError } from './weight-sync/errors.ts';
export type { LoadInto } from './weight-sync/into.ts';
export type { WeightSyncOptions } from './weight-sync/options.ts';
export type { WeightStream } from './weight-sync/plan.ts';
