/**
 * What a worker's Collective builds from the job's ClusterConfig: the tensor
 * compressor (its codec probed at once, so a missing or broken codec fails
 * before the first message) and the network emulator (every worker must be in
 * a group). Problems surface as `ready` rejecting; the Collective's group
 * creation awaits it.
 */
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import { retold } from '../runtime/errors.ts';
import { probeCodec } from './compression/codecs.ts';
import { TensorCompressor } from './compression/tensor-compressor.ts';
import { NetEmulator } from './netem/net-emulator.ts';
import type { P2PServices } from './services.ts';

export interface LoadedServices {
  services: P2PServices;
  /** Resolves once the codec passed its probe; rejects with what is wrong with the config on this worker. */
  ready: Promise<void>;
}

export function loadP2PServices(
  config: ClusterConfig | undefined,
  worker: string,
  workers: readonly string[],
): LoadedServices {
  const services: P2PServices = {};
  if (config?.collective.maxMessageBytes !== undefined) {
    services.maxMessageBytes = config.collective.maxMessageBytes;
  }
  const who = `worker "${worker}"`;
  try {
    const compression = config?.collective.tensorCompression;
    if (compression?.enabled) {
      const poolBytes = config!.collective.tensorBufferPool!.maxBytes;
      services.compressor = new TensorCompressor(compression, poolBytes);
    }
    if (config?.netEmulation) services.netem = new NetEmulator(config.netEmulation, worker, workers);
  } catch (error) {
    return {
      services,
      ready: Promise.reject(retold(error, `${who}: ${(error as Error).message}`)),
    };
  }
  const ready = services.compressor ? probeCodec(services.compressor.codec, who) : Promise.resolve();
  return { services, ready };
}
