/** The network store's public surface: a TensorStore between processes on different machines. */
export type { NetworkPeer } from './dial.ts';
export {
  NetworkStoreBufferError,
  NetworkStoreFrameError,
  NetworkStoreHandshakeError,
  NetworkStoreProtocolError,
} from './errors.ts';
export { NetworkTensorStore } from './network-tensor-store.ts';
export type { NetworkConnectOptions, NetworkStoreOptions } from './options.ts';
