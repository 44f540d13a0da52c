/**
 * What every rank process loads before its entry (the module the process
 * launchers' setup seam names), and what the package root loads: the
 * thread side (thread-setup.ts) and the process context builders, so a rank
 * has the whole library whether or not its entry imports tensorcomm.
 */
import './thread-setup.ts';
import {
  abortProcessJob,
  createProcessJob,
  initProcess,
  removeProcessJob,
} from './context/process-context.ts';
import { registerProcessSetup } from './launch/rank-setup.ts';

export { abortProcessJob, createProcessJob, initProcess, removeProcessJob };

// The process launchers of this process use these, however this module was loaded (a bundle, tsx, dist/).
registerProcessSetup(import.meta.url, { abortProcessJob, createProcessJob, initProcess, removeProcessJob });
