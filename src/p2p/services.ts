/**
 * What a worker's Collective lends every channel of every group: tensor
 * compression and the emulated network, each absent unless configured.
 */
import type { TensorCompressor } from './compression/tensor-compressor.ts';
import type { NetEmulator } from './netem/net-emulator.ts';

export interface P2PServices {
  compressor?: TensorCompressor;
  netem?: NetEmulator;
  /** What the config says one message may declare (cluster.collective.max_message_bytes); else the default. */
  maxMessageBytes?: number;
}

/** A message's arrival time on the emulator clock, given its wire bytes (a broadcast charges all receivers once). */
export type Schedule = (wireBytes: number) => number;

/** How long a receiver waits for a codec slot when the call sets no timeout (the default collective timeout). */
export const DEFAULT_CODEC_WAIT_MS = 300_000;
