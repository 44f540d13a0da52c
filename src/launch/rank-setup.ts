/**
 * The seam between the thread launcher (launch/) and the layers above it
 * that build a RankContext (stores, groups). Those layers register a module
 * here; the launcher imports it in the main thread to create a job's shared
 * state and in every rank thread to build the rank's context, so launch/
 * never imports upward.
 */

import type { ResolvedDebugOptions } from '../debug/options.ts';
import type { ResolvedPredictOptions } from '../predict/predict-options.ts';
import type { AbortWord } from '../runtime/abort-word.ts';
import type { ClusterConfig } from '../runtime/config/cluster-config.ts';
import type { LostHow } from '../runtime/faults/injector.ts';
import type { ChaosOptions, FaultSpec } from '../runtime/faults/options.ts';
import { importModule } from '../runtime/import-module.ts';
import type { Device } from '../tensor/dtype.ts';

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
  /** Checks, flight recorder and trace (resolved by the launcher so every rank agrees); see DebugOptions. */
  debug?: ResolvedDebugOptions;
  /** The job's validated cluster config, if any (ctx.config). */
  config?: ClusterConfig;
  /** Injected failures and seeded delays (validated by the launcher); see runtime/faults/. */
  faults?: FaultSpec[];
  chaos?: ChaosOptions;
  /** Predict mode: the topology and output files every rank's virtual clock works to (predict/). */
  predict?: ResolvedPredictOptions;
  /** The ranks run as async tasks of one thread (spawnThreads' `threads: 1`): their groups meet in it. */
  tasks?: boolean;
}

/** What a rank thread tells its launcher beyond its outcome. */
export interface RankEvents {
  /** An injected fault takes the rank out on purpose: the job must not count it as failed. */
  lost(how: LostHow): void;
}

/** What a rank context must offer the launcher at the end of the rank's life. */
export interface ClosableContext {
  /** `failure`: what the rank's main threw, so peers waiting on the rank are told that, not just that it left. */
  close(failure?: unknown): Promise<void> | void;
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
    events?: RankEvents,
  ): Promise<ClosableContext> | ClosableContext;
}

/** The same seam for ranks that are processes: the job's shared directory and the rank's context. */
export interface ProcessSetupModule {
  /** Launcher: creates the directory the ranks of a job share; returns its path. */
  createProcessJob(jobId: string): string;
  /** Launcher, when a rank fails: every rank's pending and later waits fail with this message. */
  abortProcessJob(storeDir: string, message: string, failedRank: number | undefined): void;
  /** Launcher, once every rank has exited: removes what the job left in its directory. */
  removeProcessJob(storeDir: string): void;
  /** Rank process: builds (once) and returns this process's context from its environment. */
  initProcess(): Promise<ClosableContext>;
}

const registered: {
  threads?: string;
  processes?: string;
  threadsModule?: RankSetupModule;
  processesModule?: ProcessSetupModule;
} = {};

/**
 * `module`: what the module at `moduleUrl` exports, as this process loaded
 * it, for the launcher's side (a launcher bundled together with it, as a
 * bundled script is, could not import its TypeScript sources again without
 * a loader); without it the launcher imports `moduleUrl`.
 */
export function registerRankSetup(moduleUrl: string, module?: RankSetupModule): void {
  registered.threads = moduleUrl;
  registered.threadsModule = module;
}

export function registerProcessSetup(moduleUrl: string, module?: ProcessSetupModule): void {
  registered.processes = moduleUrl;
  registered.processesModule = module;
}

function registeredUrl(kind: 'threads' | 'processes'): string {
  const url = registered[kind];
  // The package root registers both: only code that imports tensorcomm's modules past it gets here
  // (rankTest, whose test file may import only tensorcomm/testing, says so in a LaunchError).
  if (!url) throw new Error('tensorcomm: no rank setup registered; import tensorcomm from its package root');
  return url;
}

export function rankSetupUrl(): string {
  return registeredUrl('threads');
}

export function processSetupUrl(): string {
  return registeredUrl('processes');
}

/** The thread setup module in this process (the launcher's side). */
export async function loadRankSetup(): Promise<RankSetupModule> {
  const url = rankSetupUrl();
  return registered.threadsModule ?? (await importModule<RankSetupModule>(url));
}

/** The process setup module in this process (the launcher's side). */
export async function loadProcessSetup(): Promise<ProcessSetupModule> {
  const url = processSetupUrl();
  return registered.processesModule ?? (await importModule<ProcessSetupModule>(url));
}
