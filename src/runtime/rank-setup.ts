/**
 * The seam between the thread launcher (runtime/) and the layers above it
 * that build a RankContext (stores, groups). Those layers register a module
 * here; the launcher imports it in the main thread to create a job's shared
 * state and in every rank thread to build the rank's context, so runtime/
 * never imports upward.
 */

import type { Device } from '../tensor/dtype.ts';
import type { AbortWord } from './abort-word.ts';
import type { ClusterConfig } from './config/cluster-config.ts';

export interface RankIdentity {
  rank: number;
  worldSize: number;
  name: string;
  device: Device;
  /** Every rank's worker name and device, by global rank. */
  names: readonly string[];
  devices: readonly Device[];
}

export interface JobOptions {
  worldSize: number;
  /** Default timeout of every collective and store wait, in milliseconds. */
  collectiveTimeoutMs: number;
  /** The job's validated cluster config, if any (ctx.config). */
  config?: ClusterConfig;
}

/** What a rank context must offer the launcher at the end of the rank's life. */
export interface ClosableContext {
  close(): Promise<void> | void;
}

export interface RankSetupModule {
  /** Main thread: the structured-cloneable state every rank of a job shares. */
  createJobShared(options: JobOptions): unknown;
  /** Main thread, on abort: wake every rank parked on the shared state. */
  wakeJob(shared: unknown): void;
  /** Rank thread: builds the context handed to the entry's main function. */
  createRankContext(
    identity: RankIdentity,
    shared: unknown,
    abort: AbortWord,
    options: JobOptions,
  ): Promise<ClosableContext> | ClosableContext;
}

let registered: string | undefined;

export function registerRankSetup(moduleUrl: string): void {
  registered = moduleUrl;
}

export function rankSetupUrl(): string {
  if (!registered)
    throw new Error('tensorcomm: no rank setup registered; import tensorcomm from its package root');
  return registered;
}
