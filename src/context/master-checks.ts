/**
 * What a rank another engine started can tell about the rendezvous rank 0
 * serves: whether rank 0 will refuse to serve it at all (checked on every rank
 * before anything, so all ranks fail at once with rank 0's own reason), and,
 * when no server ever answered, what the likely causes are.
 */
import type { ProcessEnv } from '../launch/process-env.ts';
import {
  checkSecret,
  rendezvousSecretFromEnv,
  requireSecretOffLoopback,
  SECRET_ENV,
} from '../rendezvous/auth.ts';
import { RendezvousUnreachableError } from '../rendezvous/errors.ts';

/** Throws, on every rank alike, the refusal rank 0's RendezvousServer.start would meet. */
export function checkMasterSecret(env: ProcessEnv): void {
  requireSecretOffLoopback(
    env.masterAddr,
    checkSecret(rendezvousSecretFromEnv()),
    `set ${SECRET_ENV} to the same secret of at least 16 characters for every rank (\`openssl rand -hex 32\` makes one), or MASTER_ADDR=127.0.0.1 when every rank runs on this machine`,
  );
}

/**
 * A rank that found no rendezvous server is most often waiting on a rank 0
 * that died first: its error says so, and under Slurm how to have srun end
 * the job at the first failure (torchrun and mpirun do that themselves).
 */
export function explainUnreachableMaster(error: unknown, env: ProcessEnv): unknown {
  if (!(error instanceof RendezvousUnreachableError)) return error;
  const srun =
    env.engine === 'slurm'
      ? '; run srun with --kill-on-bad-exit=1, so that the first task to fail ends the others at once'
      : '';
  return new RendezvousUnreachableError(
    `${error.message}. Rank 0 serves the rendezvous: it may have failed or exited before serving it (see its output), MASTER_ADDR:MASTER_PORT (${env.masterAddr}:${env.masterPort}) may not be rank 0's host and a port free there, or a firewall may block that port${srun}`,
  );
}
