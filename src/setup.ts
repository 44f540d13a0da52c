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
import { registerProcessSetup, registerRankSetup } from './launch/rank-setup.ts';

export {
  abortProcessJob,
  createProcessJob,
  initProcess,
  removeProcessJob,
} from './context/process-context.ts';
export { createJobShared, createRankContext, wakeJob } from './context/rank-context.ts';

registerRankSetup(import.meta.url);
registerProcessSetup(import.meta.url);
