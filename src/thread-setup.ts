/**
 * What every rank thread loads before its entry (the module the thread
 * launchers' setup seam names): the thread side of setup.ts, the rank
 * context builders and the layers that register themselves with lower ones
 * (the GPU backend with tensors and stores, p2p's `ctx.collective` with the
 * rank context, libc's memcpy with the tensor layer's shared-memory copies).
 * A rank thread runs no process job, so its bundle (rank-bundle.ts) loads
 * this instead of setup.ts, and leaves out what only process ranks and
 * launchers use (the file and network stores, the rendezvous): a large part
 * of the code each of N threads would otherwise compile.
 */
import './cuda/device-backend.ts';
import './cuda/device-ipc.ts';
import './p2p/collective.ts';
import './runtime/native-copy.ts';
import { createJobShared, createRankContext, wakeJob } from './context/rank-context.ts';
import { registerRankSetup } from './launch/rank-setup.ts';

export { createJobShared, createRankContext, wakeJob };

// The thread launchers of this process use these, however this module was loaded (a bundle, tsx, dist/).
registerRankSetup(import.meta.url, { createJobShared, createRankContext, wakeJob });
