/**
 * What every rank thread and rank process loads before its entry (the module
 * the launchers' setup seam names), so a rank has the whole library whether
 * or not its entry imports tensorcomm: the context builders, and the layers
 * that register themselves with lower ones (the GPU backend with tensors and
 * stores, p2p's `ctx.collective` with the rank context).
 */
import './cuda/device-backend.ts';
import './cuda/device-ipc.ts';
import './p2p/collective.ts';
import {
  abortProcessJob,
  createProcessJob,
  initProcess,
  removeProcessJob,
} from './context/process-context.ts';
import { createJobShared, createRankContext, wakeJob } from './context/rank-context.ts';
import { registerProcessSetup, registerRankSetup } from './launch/rank-setup.ts';

export {
  abortProcessJob,
  createJobShared,
  createProcessJob,
  createRankContext,
  initProcess,
  removeProcessJob,
  wakeJob,
};

// The launchers of this process use these, however this module was loaded (a bundle, tsx, dist/).
registerRankSetup(import.meta.url, { createJobShared, createRankContext, wakeJob });
registerProcessSetup(import.meta.url, { abortProcessJob, createProcessJob, initProcess, removeProcessJob });
